//! Listeners (docs/security.md#listeners): Kafka's `listeners`,
//! `advertised.listeners` and `listener.security.protocol.map` ideas as
//! `--listener NAME=PROTOCOL://host:port` and `--advertised-listener NAME=host:port`.
//! Each listener has a name, a security protocol and an address; clients are told the
//! addresses of the listener they came in on, for every broker that has it.
//!
//! This module is the listeners' specification only (parsing, the advertised
//! endpoints a lease carries): no socket. `server` binds and serves them; `config`
//! parses flags into them, so it sits with config below everything else.

use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s))
    }

    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

/// One `--listener`: `NAME=PROTOCOL://host:port`, or `PROTOCOL://host:port` for a
/// listener named after its protocol. An empty host is every interface (`SSL://:9093`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub addr: SocketAddr,
}

impl std::fmt::Display for ListenerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}://{}", self.name, self.protocol.name(), self.addr)
    }
}

fn valid_listener_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub fn parse_listener(s: &str) -> Result<ListenerSpec, String> {
    let expected = "expected NAME=PROTOCOL://HOST:PORT or PROTOCOL://HOST:PORT (PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)";
    let (named, rest) = match s.split_once("://") {
        Some((head, rest)) => (head, rest),
        None => return Err(format!("{expected}, got {s:?}")),
    };
    // Names are upper-cased, as Kafka's ListenerName.normalised does.
    let (name, protocol) = match named.split_once('=') {
        Some((name, protocol)) => (name.to_ascii_uppercase(), protocol),
        None => (named.to_ascii_uppercase(), named),
    };
    let protocol = SecurityProtocol::from_name(protocol)
        .ok_or_else(|| format!("unknown security protocol {protocol:?} in {s:?}; {expected}"))?;
    if !valid_listener_name(&name) {
        return Err(format!(
            "listener name {name:?} in {s:?} must be letters, digits, '_' or '-'"
        ));
    }
    let addr = if let Some(port) = rest.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else {
        rest.to_string()
    };
    let addr: SocketAddr = addr.parse().map_err(|_| {
        format!("{rest:?} in {s:?} is not an IP address and port (e.g. 0.0.0.0:9093, [::]:9093, :9093)")
    })?;
    Ok(ListenerSpec { name, protocol, addr })
}

/// One `--advertised-listener`: `NAME=host:port`, or `host:port` for the first listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertisedSpec {
    pub name: Option<String>,
    pub host: String,
    pub port: u16,
}

pub fn parse_advertised(s: &str) -> Result<AdvertisedSpec, String> {
    let (name, hp) = match s.split_once('=') {
        Some((name, hp)) => {
            if !valid_listener_name(name) {
                return Err(format!(
                    "listener name {name:?} in {s:?} must be letters, digits, '_' or '-'"
                ));
            }
            (Some(name.to_ascii_uppercase()), hp)
        }
        None => (None, s),
    };
    let (host, port) = parse_host_port(hp)?;
    Ok(AdvertisedSpec { name, host, port })
}

/// Where clients reach one broker, by listener name. A lease written before listeners
/// existed has only its host and port: that is its PLAINTEXT listener.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Endpoints(pub BTreeMap<String, (String, u16)>);

impl Endpoints {
    pub fn of_lease(lease: &kaas_core::broker::BrokerLease) -> Endpoints {
        if lease.listeners.is_empty() {
            Endpoints(BTreeMap::from([(
                "PLAINTEXT".to_string(),
                (lease.host.clone(), lease.port),
            )]))
        } else {
            Endpoints(
                lease
                    .listeners
                    .iter()
                    .map(|(name, e)| (name.clone(), (e.host.clone(), e.port)))
                    .collect(),
            )
        }
    }

    /// One PLAINTEXT listener (tests, embedded brokers).
    pub fn plaintext(host: &str, port: u16) -> Endpoints {
        Endpoints(BTreeMap::from([("PLAINTEXT".to_string(), (host.to_string(), port))]))
    }

    /// The address on `listener`, if this broker has that listener.
    pub fn on(&self, listener: &str) -> Option<(&str, u16)> {
        self.0.get(listener).map(|(h, p)| (h.as_str(), *p))
    }
}

/// The listeners a configuration asks for, checked: `--listener` values, or one
/// PLAINTEXT listener on `--listen` when there are none. Errors name the flag.
pub fn resolve(
    listeners: &[ListenerSpec],
    listen: SocketAddr,
    listen_given: bool,
) -> Result<Vec<ListenerSpec>, String> {
    if listeners.is_empty() {
        return Ok(vec![ListenerSpec {
            name: "PLAINTEXT".into(),
            protocol: SecurityProtocol::Plaintext,
            addr: listen,
        }]);
    }
    if listen_given {
        return Err("--listen and --listener cannot be used together: give the plaintext listener as --listener PLAINTEXT://HOST:PORT".into());
    }
    for (i, l) in listeners.iter().enumerate() {
        if listeners[..i].iter().any(|o| o.name == l.name) {
            return Err(format!("--listener: the name {} is used twice", l.name));
        }
        if l.addr.port() != 0 && listeners[..i].iter().any(|o| o.addr == l.addr) {
            return Err(format!("--listener: the address {} is used twice", l.addr));
        }
    }
    Ok(listeners.to_vec())
}

/// The advertised address of each listener: the `--advertised-listener` naming it (or
/// the unnamed one, for the first listener), else its bound address.
pub fn advertised(listeners: &[(ListenerSpec, SocketAddr)], specs: &[AdvertisedSpec]) -> Result<Endpoints, String> {
    let mut out = BTreeMap::new();
    for spec in specs {
        if let Some(name) = &spec.name {
            if !listeners.iter().any(|(l, _)| &l.name == name) {
                return Err(format!(
                    "--advertised-listener names {name}, which is not a listener (listeners: {})",
                    listeners
                        .iter()
                        .map(|(l, _)| l.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    if specs.iter().filter(|s| s.name.is_none()).count() > 1 {
        return Err("--advertised-listener: more than one without a listener name; write NAME=HOST:PORT".into());
    }
    for (i, (l, bound)) in listeners.iter().enumerate() {
        let given = specs
            .iter()
            .find(|s| s.name.as_deref() == Some(&l.name))
            .or_else(|| specs.iter().find(|s| s.name.is_none() && i == 0));
        let addr = match given {
            Some(s) => (s.host.clone(), s.port),
            None => (bound.ip().to_string(), bound.port()),
        };
        // Every interface (0.0.0.0, ::) is no address to connect to: a client on
        // another host would connect to itself, and so would a peer broker's notices.
        // Kafka refuses "the nonroutable meta-address" too.
        if addr.0.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified()) {
            return Err(format!(
                "listener {} is bound to {bound} (every interface), which clients cannot connect to: \
                 give the address to advertise with --advertised-listener {}=HOST:{}",
                l.name,
                l.name,
                bound.port()
            ));
        }
        out.insert(l.name.clone(), addr);
    }
    Ok(Endpoints(out))
}

/// Parses `host:port` (IPv6 hosts in brackets).
pub fn parse_host_port(s: &str) -> Result<(String, u16), String> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("expected HOST:PORT, got {s:?}"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("port {port:?} in {s:?} is not a number in 1..=65535"))?;
    let host = host.trim_matches(['[', ']']);
    if host.is_empty() || port == 0 {
        return Err(format!("expected HOST:PORT with a host and a non-zero port, got {s:?}"));
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_like_kafkas() {
        let l = parse_listener("INTERNAL=SASL_SSL://127.0.0.1:9094").unwrap();
        assert_eq!(
            (l.name.as_str(), l.protocol, l.addr.port()),
            ("INTERNAL", SecurityProtocol::SaslSsl, 9094)
        );
        assert_eq!(parse_listener("internal=SSL://:1").unwrap().name, "INTERNAL");
        assert_eq!(
            parse_advertised("internal=a:1").unwrap().name.as_deref(),
            Some("INTERNAL")
        );
        let l = parse_listener("ssl://:9093").unwrap();
        assert_eq!((l.name.as_str(), l.addr), ("SSL", "0.0.0.0:9093".parse().unwrap()));
        assert!(parse_listener("X=TLS://0.0.0.0:1")
            .unwrap_err()
            .contains("unknown security protocol"));
        assert!(parse_listener("0.0.0.0:9092").is_err());
        assert!(parse_listener("A B=SSL://0.0.0.0:1").is_err());
        assert!(parse_listener("SSL://host.example:1")
            .unwrap_err()
            .contains("not an IP address"));
    }

    #[test]
    fn advertised_addresses_follow_the_listener_names() {
        let bound: Vec<(ListenerSpec, SocketAddr)> = ["PLAINTEXT://127.0.0.1:0", "EXT=SSL://0.0.0.0:0"]
            .iter()
            .zip(["127.0.0.1:9092", "0.0.0.0:9093"])
            .map(|(l, b)| (parse_listener(l).unwrap(), b.parse().unwrap()))
            .collect();
        let e = advertised(&bound, &[parse_advertised("EXT=kaas.example:443").unwrap()]).unwrap();
        assert_eq!(e.on("PLAINTEXT"), Some(("127.0.0.1", 9092)));
        assert_eq!(e.on("EXT"), Some(("kaas.example", 443)));
        assert_eq!(e.on("OTHER"), None);
        let ext = parse_advertised("EXT=kaas.example:443").unwrap();
        let e = advertised(&bound, &[parse_advertised("a.example:1").unwrap(), ext]).unwrap();
        assert_eq!(
            e.on("PLAINTEXT"),
            Some(("a.example", 1)),
            "an unnamed one is the first listener's"
        );
        assert!(advertised(&bound, &[parse_advertised("NOPE=a:1").unwrap()]).is_err());
        // A listener on every interface (0.0.0.0, ::) advertises nothing clients can
        // connect to: it needs an address given, as Kafka refuses
        // "the nonroutable meta-address 0.0.0.0". Before, 0.0.0.0 was advertised: a
        // client on another host connected to itself, and a peer broker's notices too.
        let e = advertised(&bound, &[]).unwrap_err();
        assert!(
            e.contains("EXT") && e.contains("0.0.0.0:9093") && e.contains("--advertised-listener"),
            "{e}"
        );
        let v6: Vec<(ListenerSpec, SocketAddr)> = vec![(
            parse_listener("PLAINTEXT://[::]:0").unwrap(),
            "[::]:9092".parse().unwrap(),
        )];
        assert!(advertised(&v6, &[]).is_err());
        assert!(advertised(&v6, &[parse_advertised("0.0.0.0:9092").unwrap()]).is_err());
        assert!(advertised(&v6, &[parse_advertised("[::]:9092").unwrap()]).is_err());
        assert!(advertised(&v6, &[parse_advertised("kaas.example:9092").unwrap()]).is_ok());
        assert!(resolve(&[bound[0].0.clone(), bound[0].0.clone()], bound[0].1, false).is_err());
        assert!(resolve(&[bound[0].0.clone()], bound[0].1, true).is_err());
    }
}
