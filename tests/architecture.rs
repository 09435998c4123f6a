//! The layering ARCHITECTURE.md promises, checked: no import circle between the modules
//! of any crate (scripts/import-circles.py, which names each circle it finds).

use std::path::Path;
use std::process::Command;

#[test]
fn no_crate_has_an_import_circle() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(repo.join("scripts/import-circles.py"))
        .current_dir(repo)
        .output()
        .expect("python3 runs scripts/import-circles.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "import circles:\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("import-circles: 0 circle(s)"), "{stdout}");
}
