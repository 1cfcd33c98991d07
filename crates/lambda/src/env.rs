//! Reading a Lambda's configuration from its environment, shared by the three functions.
//! Takes a lookup function, so tests pass a map and nothing calls `set_var`.

/// A missing or malformed variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("environment variable {name} is invalid: {reason}")]
    Invalid { name: &'static str, reason: String },
}

/// Environment variables through a lookup function; blank values count as unset.
pub struct Env<F> {
    lookup: F,
}

impl<F> std::fmt::Debug for Env<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Env")
    }
}

impl<F: Fn(&str) -> Option<String>> Env<F> {
    pub fn new(lookup: F) -> Self {
        Self { lookup }
    }

    /// The value, if set and not blank.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|v| !v.trim().is_empty())
    }

    /// The value of an optional setting: unset, blank and `none` are all absent (`none` is
    /// what a template passes for an optional parameter left out, as a parameter's value may
    /// not always be empty).
    pub fn optional(&self, name: &str) -> Option<String> {
        self.get(name).filter(|v| v.trim() != "none")
    }

    pub fn required(&self, name: &'static str) -> Result<String, EnvError> {
        self.get(name).ok_or(EnvError::Missing(name))
    }

    /// An http(s) URL, if set; anything else is refused, naming `what` it should be.
    pub fn http_url(&self, name: &'static str, what: &str) -> Result<Option<String>, EnvError> {
        match self.get(name) {
            Some(url) if !(url.starts_with("https://") || url.starts_with("http://")) => {
                Err(EnvError::Invalid {
                    name,
                    reason: format!("must be an http(s) URL ({what})"),
                })
            }
            url => Ok(url),
        }
    }

    /// A whole number, `default` when unset.
    pub fn number(&self, name: &'static str, default: u64) -> Result<u64, EnvError> {
        self.get(name).map_or(Ok(default), |v| {
            v.trim().parse().map_err(|_| EnvError::Invalid {
                name,
                reason: format!("`{v}` is not a whole number"),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn blank_is_unset_none_is_an_absent_option_and_numbers_are_checked() {
        let env = Env::new(|k: &str| match k {
            "SET" => Some("x".to_owned()),
            "BLANK" => Some("  ".to_owned()),
            "N" => Some(" 42 ".to_owned()),
            "BAD" => Some("4.2".to_owned()),
            "OFF" => Some(" none ".to_owned()),
            _ => None,
        });
        assert_eq!(format!("{env:?}"), "Env", "no value shows");
        assert_eq!(env.required("SET"), Ok("x".to_owned()));
        assert_eq!(env.required("BLANK"), Err(EnvError::Missing("BLANK")));
        assert_eq!(env.required("NONE"), Err(EnvError::Missing("NONE")));
        assert_eq!(env.number("N", 1), Ok(42));
        assert_eq!(env.optional("SET"), Some("x".to_owned()));
        assert_eq!(env.optional("BLANK"), None);
        assert_eq!(env.optional("NONE"), None);
        assert_eq!(env.optional("OFF"), None, "`none` is absent");
        assert_eq!(
            env.get("OFF"),
            Some(" none ".to_owned()),
            "for optional settings only"
        );
        assert_eq!(env.number("NONE", 7), Ok(7));
        let url = |value: &str| {
            let value = value.to_owned();
            Env::new(move |_: &str| Some(value.clone())).http_url("URL", "the queue's URL")
        };
        assert_eq!(url("https://q"), Ok(Some("https://q".to_owned())));
        assert_eq!(
            url("http://127.0.0.1:1/q"),
            Ok(Some("http://127.0.0.1:1/q".to_owned()))
        );
        assert_eq!(
            url("ftp://q").unwrap_err().to_string(),
            "environment variable URL is invalid: must be an http(s) URL (the queue's URL)"
        );
        assert_eq!(env.http_url("NONE", "a URL"), Ok(None));
        assert!(matches!(
            env.number("BAD", 1),
            Err(EnvError::Invalid { name: "BAD", .. })
        ));
    }
}
