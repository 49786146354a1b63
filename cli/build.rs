//! Link layout for the `hydra` binary.
//!
//! An optimised build on x86_64 Linux whose linker is rustc's own lld hands it
//! `layout/hydra.order` (bench/layout.sh): the functions a download runs, placed side by side
//! so a download maps the pages of code it runs rather than most of `.text` (the kernel maps
//! the cached pages around every page fault). The order only moves functions; a name the
//! build does not have (another compiler, another profile, changed code) is skipped.
//! `HYDRA_LINK_ORDER=off` leaves the layout to the linker.

use std::env;
use std::process::Command;

/// rustc links with its bundled lld by default on x86_64-unknown-linux-gnu from this version.
const LLD_DEFAULT_SINCE_MINOR: u32 = 90;

fn main() {
    println!("cargo:rerun-if-changed=layout/hydra.order");
    println!("cargo:rerun-if-env-changed=HYDRA_LINK_ORDER");
    if !links_with_bundled_lld() || env::var("HYDRA_LINK_ORDER").is_ok_and(|v| v == "off") {
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
