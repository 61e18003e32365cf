//! Which build of triage a lab measured: the cargo profile the running binary was built with
//! (`release`, `ci`, `debug`, …; from `build.rs`), whether debug assertions are on, and the
//! binary the lab starts its servers from. The front end's CPU per request differs between
//! profiles (docs/front.md), so a report that compares it with another engine says which.

use std::path::Path;

use serde::Serialize;

/// The cargo profile this crate was built with (the target directory's subdirectory).
pub const PROFILE: &str = env!("TRIAGE_BUILD_PROFILE");

/// A lab's build, for its summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildInfo {
    /// The cargo profile of the running binary (the lab's own build).
    pub profile: String,
    /// Whether debug assertions are compiled in (a debug build measures nothing useful).
    pub debug_assertions: bool,
    /// The binary the lab starts as server and front end (`TRIAGE_BIN` or the running one).
    pub binary: String,
}

impl BuildInfo {
    /// The running binary's build, with `binary` the one the lab starts.
    pub fn of(binary: &Path) -> Self {
        Self {
            profile: PROFILE.to_string(),
            debug_assertions: cfg!(debug_assertions),
            binary: binary.display().to_string(),
        }
    }

    /// One line for a report: `cargo profile P (BINARY)`, and a warning for a debug build.
    pub fn line(&self) -> String {
        format!(
            "cargo profile `{}`{} ({})",
            self.profile,
            if self.debug_assertions {
                ", debug assertions on"
            } else {
                ""
            },
            self.binary
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_the_target_directory_s_subdirectory() {
        // The test binary is built with the same profile as the library: its path is
        // <target>/<profile>/deps/<test>.
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().and_then(|d| d.parent()).unwrap();
        assert_eq!(dir.file_name().unwrap().to_str().unwrap(), PROFILE);
        let b = BuildInfo::of(Path::new("/x/triage"));
        assert!(b.line().contains(&format!("`{PROFILE}`")));
        assert!(b.line().ends_with("(/x/triage)"));
        assert_eq!(b.debug_assertions, cfg!(debug_assertions));
    }
}
