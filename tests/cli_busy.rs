//! The busy-host check, provoked: the test starts one busy loop per CPU (stopped by
//! their process ids when it ends), then `placer run` and `placer profile` must warn on
//! one line with the figures, record them in the checkpoint, and refuse with
//! `--require-quiet`. In a test binary of its own, so that the loops slow no other test.

use std::process::{Child, Command};

mod common;
use common::{path_str, text, zoo_file};

/// Busy loops on every CPU, killed by their process ids when dropped.
struct Competitors(Vec<Child>);

impl Competitors {
    fn start() -> Competitors {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let loops = (0..cpus)
            .map(|_| Command::new("sh").args(["-c", "while :; do :; done"]).spawn().expect("sh starts"))
            .collect();
        // Let them take the CPUs before anything is measured.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Competitors(loops)
    }
}

impl Drop for Competitors {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // Each by its own process id: `Child::kill` signals exactly that process.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_busy_host_is_reported_recorded_and_refused_on_request() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = zoo_file(dir.path(), "mlp", "2");
    let ckpt = dir.path().join("ck");
    let competitors = Competitors::start();

    let run = common::placer(&["run", path_str(&model), "-n", "1", "--warmup", "0"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let stderr = text(&run.stderr);
    let warning = stderr.lines().find(|l| l.starts_with("warning: busy host before the run: ")).unwrap_or_else(|| {
        panic!("no busy-host warning with busy loops on every CPU:\n{stderr}");
    });
    assert!(warning.contains("other processes competed for the CPUs") && warning.contains("of "), "{warning}");

    let refused = common::placer(&["run", path_str(&model), "-n", "1", "--require-quiet"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    let line = text(&refused.stderr);
    assert!(line.contains("busy host before the run") && line.contains("refused by --require-quiet"), "{line}");

    let profile = common::placer(&["profile", path_str(&model), "--checkpoint-dir", path_str(&ckpt), "--rounds", "1"]);
    assert!(profile.status.success(), "{}", text(&profile.stderr));
    let stderr = text(&profile.stderr);
    assert_eq!(stderr.matches("warning: busy host").count(), 1, "one warning line per run:\n{stderr}");
    assert!(text(&profile.stdout).contains("BUSY in"), "the summary records it:\n{}", text(&profile.stdout));
    let strict = common::placer(&[
        "profile",
        path_str(&model),
        "--checkpoint-dir",
        path_str(&dir.path().join("strict")),
        "--rounds",
        "1",
        "--require-quiet",
    ]);
    assert_eq!(strict.status.code(), Some(2), "{}", text(&strict.stderr));
    drop(competitors);

    // The checkpoint kept the figures: compare names the busy profile.
    let checkpoint = std::fs::read_dir(&ckpt).expect("checkpoint dir").next().expect("a checkpoint").expect("entry");
    let compared = common::placer(&["compare", path_str(&checkpoint.path()), path_str(&checkpoint.path())]);
    assert!(text(&compared.stderr).contains("was measured on a busy host: BUSY in"), "{}", text(&compared.stderr));
}
