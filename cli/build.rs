//! Link layout for the `hydra` binary.
//!
//! An optimised build on x86_64 Linux whose linker is rustc's own lld hands it
//! `layout/hydra.order` (bench/layout.sh): the functions a download runs, placed side by side
//! so a download maps the pages of code it runs rather than most of `.text` (the kernel maps
//! the cached pages around every page fault). The order only moves functions; a name the
//! build does not have (another compiler, another profile, changed code) is skipped.
//! `HYDRA_LINK_ORDER=off` leaves the layout to the linker.
//!
//! The same build packs its relative relocations (`-z pack-relative-relocs`, DT_RELR) when
//! it builds for the machine it runs on and that machine's glibc loads them (2.36 and
//! later): the loader then reads a few KiB of relocations at start instead of the whole
//! `.rela.dyn` (472 KiB), every page of which stayed resident. The binary then needs glibc
//! 2.36 to start, which the machine that built it has. `HYDRA_RELR=off` keeps `.rela.dyn`.

use std::env;
use std::process::Command;

/// rustc links with its bundled lld by default on x86_64-unknown-linux-gnu from this version.
const LLD_DEFAULT_SINCE_MINOR: u32 = 90;

fn main() {
    println!("cargo:rerun-if-changed=layout/hydra.order");
    println!("cargo:rerun-if-env-changed=HYDRA_LINK_ORDER");
    println!("cargo:rerun-if-env-changed=HYDRA_RELR");
    if !links_with_bundled_lld() {
        return;
    }
    if env::var("HYDRA_RELR").map_or(true, |v| v != "off") && native_glibc_loads_relr() {
        println!("cargo:rustc-link-arg-bin=hydra=-Wl,-z,pack-relative-relocs");
    }
    if env::var("HYDRA_LINK_ORDER").is_ok_and(|v| v == "off") {
        return;
    }
    let order = format!(
        "{}/layout/hydra.order",
        env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")
    );
    println!("cargo:rustc-link-arg-bin=hydra=-Wl,--symbol-ordering-file={order}");
    println!("cargo:rustc-link-arg-bin=hydra=-Wl,--no-warn-symbol-ordering");
}

/// An optimised build for x86_64-unknown-linux-gnu by a rustc that links with its own lld,
/// with no linker chosen in the configuration or the flags.
fn links_with_bundled_lld() -> bool {
    let var = |k: &str| env::var(k).unwrap_or_default();
    let target = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let own_linker = env::var_os("RUSTC_LINKER").is_some()
        || ["linker", "link-self-contained", "fuse-ld"]
            .iter()
            .any(|f| flags.contains(f));
    target
        && var("PROFILE") == "release"
        && !own_linker
        && rustc_minor() >= Some(LLD_DEFAULT_SINCE_MINOR)
}

/// The minor version of the compiler cargo builds with (`rustc 1.95.0 (…)` → 95).
fn rustc_minor() -> Option<u32> {
    let rustc = env::var_os("RUSTC")?;
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    version.split('.').nth(1)?.parse().ok()
}

/// glibc's loader reads packed relative relocations from this version on.
const RELR_SINCE_GLIBC: (u32, u32) = (2, 36);

/// Whether the build is for the machine it runs on and that machine's glibc
/// (`getconf GNU_LIBC_VERSION`, e.g. `glibc 2.36`) loads DT_RELR.
fn native_glibc_loads_relr() -> bool {
    if env::var("HOST").ok() != env::var("TARGET").ok() {
        return false;
    }
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= RELR_SINCE_GLIBC,
        _ => false,
    }
}
