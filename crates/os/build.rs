//! Builds the BPF object of `proctrace` (bpf/proctrace.bpf.c) when the `bpf` feature is on.
//!
//! Needs clang (BPF target), bpftool and the kernel's BTF (/sys/kernel/btf/vmlinux, from
//! which `vmlinux.h` is generated into OUT_DIR). When any of them is missing the build goes
//! on without the object (a cargo warning says why) and the BPF logger reports at run time
//! that it was built without it; the /proc logger still works.
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(proctrace_bpf_obj)");
    println!("cargo::rerun-if-changed=bpf/proctrace.bpf.c");
    println!("cargo::rerun-if-env-changed=CLANG");
    if std::env::var_os("CARGO_FEATURE_BPF").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    match build(&out) {
        Ok(()) => println!("cargo::rustc-cfg=proctrace_bpf_obj"),
        Err(why) => println!(
            "cargo::warning=proctrace: BPF logger not built ({why}); the /proc logger is used"
        ),
    }
}

fn build(out: &Path) -> Result<(), String> {
    let btf = Path::new("/sys/kernel/btf/vmlinux");
    if !btf.exists() {
        return Err("no kernel BTF at /sys/kernel/btf/vmlinux".into());
    }
    let bpftool = ["bpftool", "/usr/sbin/bpftool", "/sbin/bpftool"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .ok_or("bpftool not found")?;
    let header = Command::new(bpftool)
        .args(["btf", "dump", "file"])
        .arg(btf)
        .args(["format", "c"])
        .output()
        .map_err(|e| format!("bpftool: {e}"))?;
    if !header.status.success() {
        return Err(format!(
            "bpftool btf dump failed: {}",
            String::from_utf8_lossy(&header.stderr).trim()
        ));
    }
    std::fs::write(out.join("vmlinux.h"), &header.stdout).map_err(|e| e.to_string())?;
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let obj = out.join("proctrace.bpf.o");
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => return Err(format!("no BPF target arch for {other}")),
        Err(_) => "x86",
    };
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf"])
        .arg(format!("-D__TARGET_ARCH_{arch}"))
        .arg("-I")
        .arg(out)
        .args(["-c", "bpf/proctrace.bpf.c", "-o"])
        .arg(&obj)
        .status()
        .map_err(|e| format!("{clang}: {e}"))?;
    if !status.success() {
        return Err(format!("{clang} failed to compile bpf/proctrace.bpf.c"));
    }
    // Debug sections are not needed at run time (the .BTF section stays); best effort.
    let _ = Command::new("llvm-strip").arg("-g").arg(&obj).status();
    Ok(())
}
