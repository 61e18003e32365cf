//! Kernel parameters (`sysctl`): read and write `/proc/sys/<key with dots as slashes>`, in the
//! caller's namespaces or, for the per-network-namespace keys under `net.`, inside a given
//! network namespace ([`write_in`], [`read_in`]): the kernel resolves `/proc/sys/net` by the
//! network namespace of the thread that opens it.

use std::io;
use std::path::PathBuf;

use crate::netns::NetNs;

/// The file of `key` (`net.ipv4.tcp_congestion_control` ->
/// `/proc/sys/net/ipv4/tcp_congestion_control`); an error for a key that could name anything
/// else.
pub fn path(key: &str) -> io::Result<PathBuf> {
    let ok = !key.is_empty()
        && key.split('.').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
    if !ok {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{key}` is not a sysctl key (e.g. net.ipv4.tcp_congestion_control)"),
        ));
    }
    Ok(PathBuf::from("/proc/sys").join(key.replace('.', "/")))
}

/// The value of `key`, without its trailing newline.
pub fn read(key: &str) -> io::Result<String> {
    let p = path(key)?;
    let v = std::fs::read_to_string(&p)
        .map_err(|e| io::Error::new(e.kind(), format!("reading {key}: {e}")))?;
    Ok(v.trim_end_matches('\n').to_owned())
}

/// Set `key` to `value`. The error names both (the kernel answers an unknown TCP congestion
/// control, for one, with "No such file or directory").
pub fn write(key: &str, value: &str) -> io::Result<()> {
    let p = path(key)?;
    std::fs::write(&p, value)
        .map_err(|e| io::Error::new(e.kind(), format!("setting {key} = {value}: {e}")))
}

/// [`read()`] from a thread inside the network namespace `ns`.
pub fn read_in(ns: &NetNs, key: &str) -> io::Result<String> {
    ns.run(|| read(key))?
}

/// [`write()`] from a thread inside the network namespace `ns` (for `net.` keys, which each
/// network namespace holds for itself).
pub fn write_in(ns: &NetNs, key: &str, value: &str) -> io::Result<()> {
    ns.run(|| write(key, value))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_files_and_nothing_else() {
        assert_eq!(
            path("net.ipv4.tcp_congestion_control").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/tcp_congestion_control")
        );
        for bad in ["", "net..ipv4", "../etc/passwd", "net/ipv4", "a b"] {
            assert!(path(bad).is_err(), "{bad}");
        }
        assert_eq!(read("kernel.ostype").unwrap(), "Linux");
        assert!(read("kernel.no_such_key_of_triage").is_err());
    }

    #[test]
    fn a_network_namespace_holds_its_own_congestion_control() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIP a_network_namespace_holds_its_own_congestion_control: needs root");
            return;
        }
        let key = "net.ipv4.tcp_congestion_control";
        let host = read(key).unwrap();
        let ns = std::thread::spawn(crate::netns::unshare_current_thread)
            .join()
            .unwrap()
            .unwrap();
        // reno is always built in.
        write_in(&ns, key, "reno").unwrap();
        assert_eq!(read_in(&ns, key).unwrap(), "reno");
        assert_eq!(
            read(key).unwrap(),
            host,
            "the host's setting must not change"
        );
        let e = write_in(&ns, key, "no-such-cc").unwrap_err().to_string();
        assert!(e.contains("no-such-cc") && e.contains(key), "{e}");
    }
}
