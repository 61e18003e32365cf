//! The CGI scripts of the labs and the static 1 KB document, written into a site directory.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{LabError, Result};

/// Seed 003's CGI: burns `s` seconds of CPU (default 2).
pub const BURN_PL: &str = r#"#!/usr/bin/env perl
# triage lab (seed 003): burn about 2 s of CPU (QUERY_STRING "s=SECONDS"), then report it.
use strict;
use warnings;
my ($s) = ($ENV{QUERY_STRING} // '') =~ /s=([0-9.]+)/;
$s //= 2;
my $x = 0;
while (1) {
    for (1 .. 20000) { $x += $_ * 0.5 }
    my @t = times;
    last if $t[0] + $t[1] >= $s;
}
my @t = times;
print "Content-Type: text/plain\r\n\r\n";
printf "cpu=%.3f\n", $t[0] + $t[1];
"#;

/// Seed 000's CGI: half a million `rand()` calls, a 1 KB reply.
pub const RAND_PL: &str = r#"#!/usr/bin/env perl
# triage lab (seed 000): compute half a million random numbers, return 1 KB.
use strict;
use warnings;
my $acc = 0;
$acc += rand() for 1 .. 500_000;
my $line = sprintf("sum=%.6f\n", $acc);
print "Content-Type: text/plain\r\n\r\n";
print $line, "x" x (1023 - length $line), "\n";
"#;

/// The `comm` (the kernel's name of a process, at most 15 bytes) of processes started from `program`:
/// how the lab tells the server's own processes from its scripts (whatever their interpreter,
/// and also before they exec: a child between fork and exec still bears the server's name).
pub fn comm_of(program: &Path) -> String {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.chars().take(15).collect()
}

/// Write `burn.pl` and `rand.pl` (mode 0755) into `dir/cgi-bin`, and a 1 KB static document
/// `dir/www/1k.html`. Returns (document root, script directory).
pub fn install(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let root = dir.join("www");
    let bin = dir.join("cgi-bin");
    for d in [&root, &bin] {
        std::fs::create_dir_all(d).map_err(|e| LabError::io("creating", d, e))?;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::io("chmod", d, e))?;
    }
    for (name, text) in [("burn.pl", BURN_PL), ("rand.pl", RAND_PL)] {
        let p = bin.join(name);
        std::fs::write(&p, text).map_err(|e| LabError::io("writing", &p, e))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| LabError::io("chmod", &p, e))?;
    }
    let p = root.join("1k.html");
    std::fs::write(&p, static_1k()).map_err(|e| LabError::io("writing", &p, e))?;
    Ok((root, bin))
}

/// The 1 KB static document (exactly 1024 bytes of HTML).
pub fn static_1k() -> Vec<u8> {
    let head = b"<!DOCTYPE html><html><body><p>";
    let tail = b"</p></body></html>\n";
    let mut v = head.to_vec();
    v.resize(1024 - tail.len(), b'x');
    v.extend_from_slice(tail);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_document_is_one_kilobyte() {
        assert_eq!(static_1k().len(), 1024);
    }
}
