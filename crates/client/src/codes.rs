//! Numeric codes for why a session ended and why the client gave up: the same numbers in both
//! clients (`conformance/reason_codes.json`), so that logs, metrics and UI copy can be keyed
//! by number while the reason string stays for people. 4000-4099: a session's end;
//! 4100-4199: the client stopping for good (the WebSocket close-code range for applications).

/// Why a session ended ([`crate::DisconnectReason::code`]) or the client gave up
/// ([`crate::Event::GaveUp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u16)]
pub enum ReasonCode {
    /// `failure_threshold` heartbeat rounds in a row not answered by a pong.
    HeartbeatFailures = 4000,
    /// Nothing received for the heartbeat timeout (or the machine slept past it).
    Silent = 4001,
    /// The server closed the socket (its close code travels beside).
    ServerClosed = 4002,
    /// The socket did not open (DNS, TCP, TLS, the handshake refused).
    ConnectFailed = 4003,
    /// The socket did not open within the connect timeout.
    ConnectTimeout = 4004,
    /// The open socket failed.
    SocketError = 4005,
    /// The token provider failed for now (retried with the backoff).
    TokenUnavailable = 4006,
    /// The application closed the client.
    ClientClosed = 4007,
    /// The application asked for a new session (the browser client's `reconnect()`).
    ReconnectAsked = 4008,
    /// Client-assisted failover: back to the global name.
    Returning = 4009,
    /// The server's `moveTo`, followed.
    Moved = 4010,
    /// Strong mode: the Region could not reach its table's quorum.
    Redirected = 4011,
    /// The platform said the network went away (the browser client's `offline` event):
    /// retries wait for it to come back.
    Offline = 4012,
    /// `max_attempts` reconnects in a row failed: the client stopped.
    AttemptsExhausted = 4100,
    /// No token will come: the client stopped.
    TokenDenied = 4101,
}

impl ReasonCode {
    /// Every code, in number order.
    pub const ALL: [ReasonCode; 15] = [
        ReasonCode::HeartbeatFailures,
        ReasonCode::Silent,
        ReasonCode::ServerClosed,
        ReasonCode::ConnectFailed,
        ReasonCode::ConnectTimeout,
        ReasonCode::SocketError,
        ReasonCode::TokenUnavailable,
        ReasonCode::ClientClosed,
        ReasonCode::ReconnectAsked,
        ReasonCode::Returning,
        ReasonCode::Moved,
        ReasonCode::Redirected,
        ReasonCode::Offline,
        ReasonCode::AttemptsExhausted,
        ReasonCode::TokenDenied,
    ];

    /// The number.
    pub fn number(self) -> u16 {
        self as u16
    }

    /// The name both clients and the vectors use (`heartbeat_failures`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ReasonCode::HeartbeatFailures => "heartbeat_failures",
            ReasonCode::Silent => "silent",
            ReasonCode::ServerClosed => "server_closed",
            ReasonCode::ConnectFailed => "connect_failed",
            ReasonCode::ConnectTimeout => "connect_timeout",
            ReasonCode::SocketError => "socket_error",
            ReasonCode::TokenUnavailable => "token_unavailable",
            ReasonCode::ClientClosed => "client_closed",
            ReasonCode::ReconnectAsked => "reconnect_asked",
            ReasonCode::Returning => "returning",
            ReasonCode::Moved => "moved",
            ReasonCode::Redirected => "redirected",
            ReasonCode::Offline => "offline",
            ReasonCode::AttemptsExhausted => "attempts_exhausted",
            ReasonCode::TokenDenied => "token_denied",
        }
    }

    /// Whether the client stopped for good.
    pub fn is_terminal(self) -> bool {
        self.number() >= 4100
    }

    /// The code of this number, if it is one.
    pub fn from_number(number: u16) -> Option<ReasonCode> {
        ReasonCode::ALL.into_iter().find(|c| c.number() == number)
    }
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.number(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_shows_as_its_number_and_its_name() {
        for code in ReasonCode::ALL {
            assert_eq!(
                code.to_string(),
                format!("{} {}", code.number(), code.name())
            );
        }
        assert!(ReasonCode::ALL
            .iter()
            .any(|c| c.to_string() == "4000 heartbeat_failures"));
    }
}
