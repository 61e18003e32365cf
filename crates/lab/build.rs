//! Records the cargo profile the lab is built with, so that a lab's report can say which
//! build of triage it measured (`build_info`): the profile's directory under the target
//! directory, from `OUT_DIR` (`<target>/<profile>/build/<crate>-<hash>/out`).

fn main() {
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    let profile = std::path::Path::new(&out)
        .ancestors()
        .nth(3)
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("unknown")
        .to_string();
    println!("cargo:rustc-env=TRIAGE_BUILD_PROFILE={profile}");
    println!("cargo:rerun-if-changed=build.rs");
}
