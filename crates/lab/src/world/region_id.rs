//! The two Regions by name, and one value per Region.
//!
//! The lab deploys what wsdr deploys: a primary and a secondary stack. Code that needs "the
//! other Region" asks [`RegionId::other`] instead of computing `1 - i`, and a value kept for
//! each Region is a [`PerRegion`], indexed by [`RegionId`], never by a bare number.

use serde::{Deserialize, Serialize};
use std::ops::{Index, IndexMut};

/// One of the two Regions of a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegionId {
    /// The Region the PRIMARY failover record points at.
    Primary,
    /// The Region the SECONDARY failover record points at.
    Secondary,
}

impl RegionId {
    /// Both Regions, primary first.
    pub const ALL: [RegionId; 2] = [RegionId::Primary, RegionId::Secondary];

    /// The other Region of the pair.
    pub fn other(self) -> Self {
        match self {
            Self::Primary => Self::Secondary,
            Self::Secondary => Self::Primary,
        }
    }

    /// 0 for the primary, 1 for the secondary: the order of the control API's `regions`
    /// lists and of the strong table's members.
    pub fn index(self) -> usize {
        match self {
            Self::Primary => 0,
            Self::Secondary => 1,
        }
    }

    /// The Region at `index` (0 or 1).
    pub fn from_index(index: usize) -> Option<Self> {
        match index {
            0 => Some(Self::Primary),
            1 => Some(Self::Secondary),
            _ => None,
        }
    }

    /// The role's name: `primary` or `secondary`.
    pub fn role(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Secondary => "secondary",
        }
    }
}

impl std::fmt::Display for RegionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.role())
    }
}

/// Read as `"primary"` / `"secondary"`, or as 0 / 1: schedules written before Regions had
/// names still replay.
impl<'de> Deserialize<'de> for RegionId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Spelled {
            Index(usize),
            Role(String),
        }
        match Spelled::deserialize(deserializer)? {
            Spelled::Index(index) => Self::from_index(index).ok_or_else(|| {
                serde::de::Error::custom("region must be 0 (primary) or 1 (secondary)")
            }),
            Spelled::Role(role) => match role.as_str() {
                "primary" => Ok(Self::Primary),
                "secondary" => Ok(Self::Secondary),
                other => Err(serde::de::Error::custom(format!(
                    "region must be primary or secondary, not `{other}`"
                ))),
            },
        }
    }
}

/// One value for each Region.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerRegion<T> {
    values: [T; 2],
}

impl<T> PerRegion<T> {
    pub fn new(primary: T, secondary: T) -> Self {
        Self {
            values: [primary, secondary],
        }
    }

    /// A value for each Region, made from its id.
    pub fn from_fn(mut make: impl FnMut(RegionId) -> T) -> Self {
        Self::new(make(RegionId::Primary), make(RegionId::Secondary))
    }

    /// Each Region with its value, primary first.
    pub fn iter(&self) -> impl Iterator<Item = (RegionId, &T)> {
        RegionId::ALL.into_iter().zip(self.values.iter())
    }

    /// The values, primary first.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.values.iter()
    }

    pub fn map<U>(self, mut f: impl FnMut(RegionId, T) -> U) -> PerRegion<U> {
        let [primary, secondary] = self.values;
        PerRegion::new(
            f(RegionId::Primary, primary),
            f(RegionId::Secondary, secondary),
        )
    }

    pub fn as_ref(&self) -> PerRegion<&T> {
        PerRegion::new(&self.values[0], &self.values[1])
    }

    /// The values as an array, primary first.
    pub fn into_array(self) -> [T; 2] {
        self.values
    }
}

impl<T> Index<RegionId> for PerRegion<T> {
    type Output = T;
    fn index(&self, region: RegionId) -> &T {
        &self.values[region.index()]
    }
}

impl<T> IndexMut<RegionId> for PerRegion<T> {
    fn index_mut(&mut self, region: RegionId) -> &mut T {
        &mut self.values[region.index()]
    }
}

impl<T> From<[T; 2]> for PerRegion<T> {
    fn from(values: [T; 2]) -> Self {
        Self { values }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_region_of_the_other_is_itself() {
        for region in RegionId::ALL {
            assert_ne!(region.other(), region);
            assert_eq!(region.other().other(), region);
        }
    }

    #[test]
    fn a_region_reads_by_role_or_by_index_and_writes_its_role() {
        for (text, region) in [
            ("\"primary\"", RegionId::Primary),
            ("0", RegionId::Primary),
            ("\"secondary\"", RegionId::Secondary),
            ("1", RegionId::Secondary),
        ] {
            let read: RegionId = serde_json::from_str(text).expect(text);
            assert_eq!(read, region);
        }
        assert_eq!(
            serde_json::to_string(&RegionId::Secondary).ok().as_deref(),
            Some("\"secondary\"")
        );
        assert!(serde_json::from_str::<RegionId>("2").is_err());
        assert!(serde_json::from_str::<RegionId>("\"tertiary\"").is_err());
    }

    #[test]
    fn per_region_values_are_found_by_their_region() {
        let mut names = PerRegion::new("east", "west");
        assert_eq!(names[RegionId::Secondary], "west");
        names[RegionId::Primary] = "north";
        let listed: Vec<_> = names.iter().map(|(r, n)| (r, *n)).collect();
        assert_eq!(
            listed,
            vec![(RegionId::Primary, "north"), (RegionId::Secondary, "west")]
        );
        let lengths = names.map(|_, n| n.len());
        assert_eq!(lengths.into_array(), [5, 4]);
    }
}
