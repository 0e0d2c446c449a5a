//! Writes every target's seed inputs (see `resound_fuzz::seeds`) into
//! `corpus/<target>/` next to this crate's manifest, replacing older seeds.

fn main() -> std::io::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (target, name, bytes) in resound_fuzz::seeds::all() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(&name), bytes)?;
    }
    println!("seeds written under {}", root.display());
    Ok(())
}
