//! Builds the C shim (variadic entry points, exported data symbols, the
//! thread-exit helper), sets the soname and the export list, and makes
//! `libjack.so.0` appear next to the binaries (`target/<profile>/`), where
//! `resound run` looks for it.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-changed=src/exports.map");
    cc::Build::new()
        .file("src/shim.c")
        .flag_if_supported("-fvisibility=default")
        .warnings(true)
        .extra_warnings(true)
        // The objects must be linked even though no Rust code names them.
        .link_lib_modifier("+whole-archive")
        .compile("resound_libjack_shim");
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("manifest dir"));
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libjack.so.0");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        dir.join("src/exports.map").display()
    );
    // OUT_DIR is target/<profile>/build/<pkg>-<hash>/out: the profile
    // directory is three levels up. Cargo always writes the library to
    // <profile>/deps/libjack.so (it copies it up to <profile>/ only when it
    // is built as a root, not as the dependency of `resound`), so the link
    // points there: it is current after any build that includes this crate.
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    if let Some(profile_dir) = out.ancestors().nth(3) {
        let link = profile_dir.join("libjack.so.0");
        let target = std::path::Path::new("deps/libjack.so");
        if std::fs::read_link(&link).ok().as_deref() != Some(target) {
            let _ = std::fs::remove_file(&link);
            let _ = std::os::unix::fs::symlink(target, &link);
        }
    }
}
