//! Which IP addresses the server refuses to reach for a client (webhook targets, push
//! configs, `http_fetch`, provider URLs): every block of IANA's special-purpose address
//! registries (IPv4 and IPv6) that is not globally reachable, multicast, and for IPv6
//! everything outside global unicast (`2000::/3`). An IPv6 address that carries an IPv4
//! address (mapped, translated, compatible, NAT64, 6to4) is judged by that address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A block of a registry: its first address, prefix length, name, and whether the
/// registry marks it globally reachable.
struct Block<A> {
    network: A,
    prefix: u32,
    name: &'static str,
    global: bool,
}

const fn v4(
    a: u8,
    b: u8,
    c: u8,
    d: u8,
    prefix: u32,
    name: &'static str,
    global: bool,
) -> Block<u32> {
    Block {
        network: u32::from_be_bytes([a, b, c, d]),
        prefix,
        name,
        global,
    }
}

const fn v6(network: u128, prefix: u32, name: &'static str, global: bool) -> Block<u128> {
    Block {
        network,
        prefix,
        name,
        global,
    }
}

/// IANA IPv4 Special-Purpose Address Registry (2024-10), plus multicast (RFC 5771).
/// The most specific block that holds an address decides.
const IPV4: &[Block<u32>] = &[
    v4(0, 0, 0, 0, 8, "this network", false),
    v4(10, 0, 0, 0, 8, "private-use", false),
    v4(100, 64, 0, 0, 10, "shared address space", false),
    v4(127, 0, 0, 0, 8, "loopback", false),
    v4(169, 254, 0, 0, 16, "link local", false),
    v4(172, 16, 0, 0, 12, "private-use", false),
    v4(192, 0, 0, 0, 24, "IETF protocol assignments", false),
    v4(192, 0, 0, 0, 29, "IPv4 service continuity prefix", false),
    v4(192, 0, 0, 8, 32, "IPv4 dummy address", false),
    v4(192, 0, 0, 9, 32, "port control protocol anycast", true),
    v4(
        192,
        0,
        0,
        10,
        32,
        "traversal using relays around NAT anycast",
        true,
    ),
    v4(192, 0, 0, 170, 31, "NAT64/DNS64 discovery", false),
    v4(192, 0, 2, 0, 24, "documentation (TEST-NET-1)", false),
    v4(192, 31, 196, 0, 24, "AS112-v4", true),
    v4(192, 52, 193, 0, 24, "AMT", true),
    v4(192, 88, 99, 0, 24, "deprecated 6to4 relay anycast", false),
    v4(192, 168, 0, 0, 16, "private-use", false),
    v4(192, 175, 48, 0, 24, "direct delegation AS112 service", true),
    v4(198, 18, 0, 0, 15, "benchmarking", false),
    v4(198, 51, 100, 0, 24, "documentation (TEST-NET-2)", false),
    v4(203, 0, 113, 0, 24, "documentation (TEST-NET-3)", false),
    v4(224, 0, 0, 0, 4, "multicast", false),
    v4(240, 0, 0, 0, 4, "reserved", false),
    v4(255, 255, 255, 255, 32, "limited broadcast", false),
];

/// IANA IPv6 Special-Purpose Address Registry (2025-01) within global unicast, the only
/// part of the IPv6 address space (IANA IPv6 Address Space registry) that is routed on
/// the internet: loopback, unspecified, the discard prefix (`100::/64`), site-local
/// (`fec0::/10`), unique-local, link-local and multicast all lie outside it.
const IPV6: &[Block<u128>] = &[
    v6(0x2000_u128 << 112, 3, "global unicast", true),
    v6(0x2001_u128 << 112, 23, "IETF protocol assignments", false),
    v6(0x2001_u128 << 112, 32, "Teredo", false),
    v6(
        (0x2001_u128 << 112) | (1 << 96) | 1,
        128,
        "port control protocol anycast",
        true,
    ),
    v6(
        (0x2001_u128 << 112) | (1 << 96) | 2,
        128,
        "TURN anycast",
        true,
    ),
    v6(
        (0x2001_u128 << 112) | (1 << 96) | 3,
        128,
        "DNS-SD service registration protocol anycast",
        true,
    ),
    v6((0x2001_u128 << 112) | (2 << 96), 48, "benchmarking", false),
    v6((0x2001_u128 << 112) | (3 << 96), 32, "AMT", true),
    v6(
        (0x2001_u128 << 112) | (4 << 96) | (0x112 << 80),
        48,
        "AS112-v6",
        true,
    ),
    v6((0x2001_u128 << 112) | (0x20 << 96), 28, "ORCHIDv2", true),
    v6(
        (0x2001_u128 << 112) | (0x30 << 96),
        28,
        "drone remote ID protocol entity tags",
        true,
    ),
    v6(
        (0x2001_u128 << 112) | (0xdb8 << 96),
        32,
        "documentation",
        false,
    ),
    v6(
        (0x2620_u128 << 112) | (0x4f << 96) | (0x8000 << 80),
        48,
        "direct delegation AS112 service",
        true,
    ),
    v6(0x3fff_u128 << 112, 20, "documentation", false),
];

fn most_specific<A: Copy>(
    blocks: &'static [Block<A>],
    holds: impl Fn(&Block<A>) -> bool,
) -> Option<&'static Block<A>> {
    blocks
        .iter()
        .filter(|block| holds(block))
        .max_by_key(|block| block.prefix)
}

fn v4_block(ip: Ipv4Addr) -> Option<&'static Block<u32>> {
    let bits = u32::from(ip);
    most_specific(IPV4, |block| {
        let mask = u32::MAX.checked_shl(32 - block.prefix).unwrap_or(0);
        bits & mask == block.network & mask
    })
}

fn v6_block(ip: Ipv6Addr) -> Option<&'static Block<u128>> {
    let bits = u128::from(ip);
    most_specific(IPV6, |block| {
        let mask = u128::MAX.checked_shl(128 - block.prefix).unwrap_or(0);
        bits & mask == block.network & mask
    })
}

/// Whether an address is one a server should not be made to reach for a client.
pub fn is_internal(ip: IpAddr) -> bool {
    classify(ip).is_some()
}

/// Why an address is refused: the registry block it falls in; `None` for a global one.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_block(v4).filter(|b| !b.global).map(|b| b.name),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_ipv4(v6) {
                return classify(IpAddr::V4(v4));
            }
            match v6_block(v6) {
                Some(block) if block.global => None,
                Some(block) => Some(block.name),
                None => Some(if v6.is_loopback() {
                    "loopback"
                } else if v6.is_unspecified() {
                    "unspecified"
                } else if v6.is_multicast() {
                    "multicast"
                } else {
                    "outside global unicast"
                }),
            }
        }
    }
}

/// The IPv4 address an IPv6 address carries to reach an IPv4 host: IPv4-mapped
/// (`::ffff:0:0/96`), IPv4-translated (`::ffff:0:0:0/96`), IPv4-compatible (`::/96`), NAT64
/// (`64:ff9b::/96`, `64:ff9b:1::/48`) and 6to4 (`2002::/16`).
fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    let tail = low(s[6], s[7]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => Some(tail),
        // `::` and `::1` are themselves (unspecified, loopback), not IPv4-compatible.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, ..] => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(tail),
        // RFC 6052 at /48: the IPv4 address spans bits 48..88, skipping the u octet (64..72).
        [0x64, 0xff9b, 1, ..] => {
            let [_, _, _, _, _, _, a, b, _, c, d, ..] = v6.octets();
            Some(Ipv4Addr::new(a, b, c, d))
        }
        [0x2002, hi, lo, ..] => Some(low(hi, lo)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_special_purpose_form_is_internal_and_global_addresses_are_not() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "192.0.0.8",
            "192.0.0.1",
            "192.0.0.171",
            "192.0.2.1",
            "192.88.99.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fec0::1",
            "100::1",
            "100::ffff:1",
            "2001::7f00:1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",
            "2001:db8::1",
            "3fff::1",
            "5f00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "64:ff9b:1:7f00:0:100::",
            "::ffff:0:7f00:1",
            "::ffff:0:a00:1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2002:f000:1::",
            "::127.0.0.1",
            "::10.0.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in [
            "93.184.216.34",
            "1.1.1.1",
            "192.0.0.9",
            "192.31.196.1",
            "2606:4700::1111",
            "2001:4860:4860::8888",
            "2001:1::1",
            "2001:3::1",
            "2620:4f:8000::1",
            "64:ff9b::101:101",
            "64:ff9b:1:101:1:100::",
            "2002:101:101::",
            "::ffff:0:101:101",
            "::1.1.1.1",
        ] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn a_refusal_names_the_registry_block() {
        assert_eq!(classify("240.0.0.1".parse().unwrap()), Some("reserved"));
        assert_eq!(classify("2001::1".parse().unwrap()), Some("Teredo"));
        assert_eq!(
            classify("fec0::1".parse().unwrap()),
            Some("outside global unicast")
        );
    }
}
