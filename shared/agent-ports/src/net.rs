//! Which network addresses are internal, for every outbound call a tenant can aim (webhooks,
//! experts): loopback, private, link-local (the instance metadata service among them), carrier-grade
//! NAT, unspecified, broadcast, multicast, reserved, IPv6 unique-local and link-local, and IPv4
//! addresses embedded in IPv6 ones. Pure: no resolution, no I/O.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not a public one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Internal {
    Loopback,
    /// RFC 1918 (10/8, 172.16/12, 192.168/16).
    Private,
    /// 169.254/16 (the instance metadata service at 169.254.169.254) and fe80::/10.
    LinkLocal,
    /// 100.64/10, used inside AWS too.
    CarrierNat,
    Unspecified,
    Broadcast,
    Multicast,
    /// 0/8, 192.0.0/24, 198.18/15, 240/4 and IPv6's deprecated site-local fec0::/10.
    Reserved,
    /// fc00::/7.
    UniqueLocal,
}

impl fmt::Display for Internal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Internal::Loopback => "a loopback address",
            Internal::Private => "a private address",
            Internal::LinkLocal => "a link-local address",
            Internal::CarrierNat => "a carrier-grade NAT address",
            Internal::Unspecified => "the unspecified address",
            Internal::Broadcast => "the broadcast address",
            Internal::Multicast => "a multicast address",
            Internal::Reserved => "a reserved address",
            Internal::UniqueLocal => "an IPv6 unique-local address",
        })
    }
}

/// The address as IPv4 when it is one in IPv6 clothing: v4-mapped (`::ffff:a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) or 6to4 (`2002:aabb:ccdd::`), each of which reaches that IPv4 address.
pub fn embedded_v4(ip: &Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let segments = ip.segments();
    let octets = ip.octets();
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(Ipv4Addr::new(octets[12], octets[13], octets[14], octets[15]));
    }
    if segments[0] == 0x2002 {
        return Some(Ipv4Addr::new(octets[2], octets[3], octets[4], octets[5]));
    }
    None
}

/// The address with any embedded IPv4 address taken out of it (see [`embedded_v4`]).
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(&v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Why `ip` is internal, or `None` for a public address.
pub fn internal(ip: IpAddr) -> Option<Internal> {
    match canonical(ip) {
        IpAddr::V4(v4) => internal_v4(&v4),
        IpAddr::V6(v6) => internal_v6(&v6),
    }
}

fn internal_v4(ip: &Ipv4Addr) -> Option<Internal> {
    let [a, b, c, _] = ip.octets();
    Some(if ip.is_loopback() {
        Internal::Loopback
    } else if ip.is_private() {
        Internal::Private
    } else if ip.is_link_local() {
        Internal::LinkLocal
    } else if a == 100 && (64..128).contains(&b) {
        Internal::CarrierNat
    } else if ip.is_unspecified() {
        Internal::Unspecified
    } else if ip.is_broadcast() {
        Internal::Broadcast
    } else if ip.is_multicast() {
        Internal::Multicast
    } else if a == 0 || a >= 240 || (a, b, c) == (192, 0, 0) || (a == 198 && (18..20).contains(&b)) {
        Internal::Reserved
    } else {
        return None;
    })
}

fn internal_v6(ip: &Ipv6Addr) -> Option<Internal> {
    let first = ip.segments()[0];
    Some(if ip.is_loopback() {
        Internal::Loopback
    } else if ip.is_unspecified() {
        Internal::Unspecified
    } else if ip.is_multicast() {
        Internal::Multicast
    } else if (first & 0xffc0) == 0xfe80 {
        Internal::LinkLocal
    } else if (first & 0xffc0) == 0xfec0 {
        Internal::Reserved
    } else if (first & 0xfe00) == 0xfc00 {
        Internal::UniqueLocal
    } else {
        return None;
    })
}

/// Whether an operator may never open `ip` to outbound calls: link-local holds the instance
/// metadata service and its credentials.
pub fn never_openable(ip: IpAddr) -> bool {
    internal(ip) == Some(Internal::LinkLocal)
}

/// A host name that names an internal host by definition (`localhost` and the `.localhost` and
/// `.internal` domains), whatever it resolves to.
pub fn is_internal_name(domain: &str) -> bool {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    domain == "localhost" || domain.ends_with(".localhost") || domain.ends_with(".internal")
}

/// An address range in CIDR notation (`10.1.0.0/16`, `fd00::/8`), normalised to its network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n` or `v6::/n`; a bare address is a single-address range.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = address.parse().map_err(|_| format!("{text:?} is not an address range"))?;
        let max = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|prefix| *prefix <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr { network: mask(address, prefix), prefix })
    }

    /// Whether `ip` (its embedded IPv4 address, if any) is in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        ip.is_ipv4() == self.network.is_ipv4() && mask(ip, self.prefix) == self.network
    }

    /// Whether the range shares any address with `other`.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        let shorter = self.prefix.min(other.prefix);
        self.network.is_ipv4() == other.network.is_ipv4() && mask(self.network, shorter) == mask(other.network, shorter)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// `ip` with all but its first `prefix` bits cleared.
fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let kept = if prefix == 0 { 0 } else { bits & (u32::MAX << (32 - u32::from(prefix))) };
            IpAddr::V4(Ipv4Addr::from(kept))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let kept = if prefix == 0 { 0 } else { bits & (u128::MAX << (128 - u32::from(prefix))) };
            IpAddr::V6(Ipv6Addr::from(kept))
        }
    }
}

/// The link-local ranges, which [`never_openable`] keeps closed.
pub fn link_local_ranges() -> [Cidr; 2] {
    [
        Cidr { network: IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)), prefix: 16 },
        Cidr { network: IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)), prefix: 10 },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn internal_addresses_are_classified_and_public_ones_are_not() {
        let cases = [
            ("127.0.0.1", Some(Internal::Loopback)),
            ("127.0.0.2", Some(Internal::Loopback)),
            ("10.0.0.1", Some(Internal::Private)),
            ("172.16.5.4", Some(Internal::Private)),
            ("192.168.1.1", Some(Internal::Private)),
            ("169.254.169.254", Some(Internal::LinkLocal)),
            ("100.64.0.1", Some(Internal::CarrierNat)),
            ("100.127.255.255", Some(Internal::CarrierNat)),
            ("0.0.0.0", Some(Internal::Unspecified)),
            ("255.255.255.255", Some(Internal::Broadcast)),
            ("224.0.0.1", Some(Internal::Multicast)),
            ("0.1.2.3", Some(Internal::Reserved)),
            ("198.18.0.1", Some(Internal::Reserved)),
            ("240.0.0.1", Some(Internal::Reserved)),
            ("::1", Some(Internal::Loopback)),
            ("::", Some(Internal::Unspecified)),
            ("fd00::1", Some(Internal::UniqueLocal)),
            ("fe80::1", Some(Internal::LinkLocal)),
            ("ff02::1", Some(Internal::Multicast)),
            ("::ffff:169.254.169.254", Some(Internal::LinkLocal)),
            ("::ffff:10.0.0.1", Some(Internal::Private)),
            ("64:ff9b::a9fe:a9fe", Some(Internal::LinkLocal)),
            ("2002:7f00:1::", Some(Internal::Loopback)),
            ("93.184.216.34", None),
            ("100.128.0.1", None),
            ("172.32.0.1", None),
            ("2606:4700::1111", None),
            ("::ffff:93.184.216.34", None),
        ];
        for (address, expected) in cases {
            assert_eq!(internal(ip(address)), expected, "{address}");
        }
        assert!(never_openable(ip("169.254.169.254")) && never_openable(ip("::ffff:169.254.0.1")));
        assert!(never_openable(ip("fe80::1")) && !never_openable(ip("127.0.0.1")));
    }

    #[test]
    fn internal_names_are_known_by_their_domain() {
        for name in ["localhost", "LOCALHOST.", "api.localhost", "ip-10-0-0-1.ec2.internal"] {
            assert!(is_internal_name(name), "{name}");
        }
        for name in ["hooks.example.com", "localhost.example.com", "internal.example.com"] {
            assert!(!is_internal_name(name), "{name}");
        }
    }

    #[test]
    fn cidrs_parse_normalise_and_contain() {
        let loopback = Cidr::parse("127.0.0.1/32").unwrap();
        assert!(loopback.contains(ip("127.0.0.1")) && loopback.contains(ip("::ffff:127.0.0.1")));
        assert!(!loopback.contains(ip("127.0.0.2")) && !loopback.contains(ip("::1")));
        let private = Cidr::parse(" 10.1.2.3/16 ").unwrap();
        assert_eq!(private.to_string(), "10.1.0.0/16");
        assert!(private.contains(ip("10.1.200.7")) && !private.contains(ip("10.2.0.1")));
        assert_eq!(Cidr::parse("10.0.0.9").unwrap().to_string(), "10.0.0.9/32");
        let v6 = Cidr::parse("fd00::/8").unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("169.254.169.254")));
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "example.com/8", "10.0.0.0/x", ""] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
        let [v4_link, v6_link] = link_local_ranges();
        assert!(Cidr::parse("169.0.0.0/8").unwrap().overlaps(&v4_link));
        assert!(Cidr::parse("169.254.169.254").unwrap().overlaps(&v4_link));
        assert!(!Cidr::parse("127.0.0.1/32").unwrap().overlaps(&v4_link));
        assert!(Cidr::parse("fe80::/64").unwrap().overlaps(&v6_link) && !v6.overlaps(&v6_link));
    }
}
