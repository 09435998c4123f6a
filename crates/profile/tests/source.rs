//! From a checkpoint back to its model: the most recent checkpoint, and every way its
//! model file can have gone wrong.

mod common;

use placer_profile::ProfileError;
use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A small real model written to `dir`, and a checkpoint of it that records the file.
fn profiled_file(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let model = placer_zoo::build("lenet-mnist", 2).expect("zoo");
    let model_file = dir.join("lenet.json");
    placer_ir::save_model(&model, &model_file).expect("write model");
    let mut profile = common::profile(model.name(), 30);
    profile.header.model_hash = model.content_hash();
    profile.header.model_source = Some(model_file.display().to_string());
    let ckpt = dir.join("ckpts").join("lenet.ckpt");
    placer_profile::save_checkpoint(&ckpt, &profile).expect("save");
    (model_file, ckpt)
}

fn touch(path: &Path, seconds_ago: u64) {
    let file = File::options().write(true).open(path).expect("open");
    file.set_modified(SystemTime::now() - Duration::from_secs(seconds_ago)).expect("set mtime");
}

#[test]
fn the_most_recent_checkpoint_is_chosen_and_other_files_are_ignored() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, age) in [("old.ckpt", 300), ("new.ckpt", 10), ("middle.ckpt", 100)] {
        placer_profile::save_checkpoint(&dir.path().join(name), &common::profile("m", 3)).expect("save");
        touch(&dir.path().join(name), age);
    }
    // Newer, but not a checkpoint by name.
    std::fs::write(dir.path().join("README.md"), "checkpoints live here").expect("write");
    std::fs::create_dir(dir.path().join("sub.ckpt")).expect("dir");
    assert_eq!(placer_profile::latest(dir.path()).expect("latest"), dir.path().join("new.ckpt"));
}

#[test]
fn no_checkpoint_says_what_to_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("README.md"), "no checkpoints yet").expect("write");
    for missing in [dir.path().to_path_buf(), dir.path().join("absent")] {
        let err = placer_profile::latest(&missing).expect_err("nothing to choose");
        assert!(matches!(err, ProfileError::NoCheckpoint { .. }), "{err:?}");
        assert!(err.to_string().contains("placer profile MODEL"), "{err}");
    }
}

#[test]
fn a_checkpoint_leads_back_to_its_model_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (model_file, ckpt) = profiled_file(dir.path());
    let found = placer_profile::profiled(&ckpt).expect("found");
    assert_eq!(found.origin, model_file.display().to_string());
    assert_eq!(found.model.content_hash(), found.profile.header.model_hash);
}

#[test]
fn a_changed_moved_or_unrecorded_model_file_is_refused_with_what_to_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (model_file, ckpt) = profiled_file(dir.path());
    let refused = |needle: &str| {
        let err = placer_profile::profiled(&ckpt).expect_err("refused");
        assert!(matches!(err, ProfileError::ModelSource { .. }), "{err:?}");
        let text = err.to_string();
        assert!(!text.contains('\n'), "one line: {text}");
        assert!(text.contains(needle), "missing '{needle}' in: {text}");
    };

    // Another model in the same file.
    let other = placer_zoo::build("lenet-mnist", 4).expect("zoo");
    placer_ir::save_model(&other, &model_file).expect("write");
    refused("has changed since it was profiled (model hash");
    refused("placer profile ");

    // A file that no longer parses.
    std::fs::write(&model_file, "{ not a model").expect("write");
    refused("no longer loads");

    // Gone.
    std::fs::remove_file(&model_file).expect("remove");
    refused("is gone; name the model where it is now: placer solve MODEL");

    // A model built in memory: no file to go back to.
    let mut profile = placer_profile::load_checkpoint(&ckpt).expect("load");
    profile.header.model_source = None;
    placer_profile::save_checkpoint(&ckpt, &profile).expect("save");
    refused("records no model file");
}

/// What `placer pipeline` then `placer solve --budget 25%` needs: a checkpoint that
/// carries its model is solved without it, whatever happened to the file.
#[test]
fn a_checkpoint_that_carries_its_model_needs_no_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (model_file, ckpt) = profiled_file(dir.path());
    let model = placer_zoo::build("lenet-mnist", 2).expect("zoo");
    let mut profile = placer_profile::load_checkpoint(&ckpt).expect("load");
    profile.model_json = Some(model.to_json());
    placer_profile::save_checkpoint(&ckpt, &profile).expect("save");
    let origin = |ckpt: &Path| {
        let found = placer_profile::profiled(ckpt).expect("solvable");
        assert_eq!(found.model.content_hash(), model.content_hash());
        found.origin
    };
    assert_eq!(origin(&ckpt), model_file.display().to_string());
    let other = placer_zoo::build("lenet-mnist", 4).expect("zoo");
    placer_ir::save_model(&other, &model_file).expect("write");
    assert!(origin(&ckpt).contains("has changed since it was profiled"));
    std::fs::remove_file(&model_file).expect("remove");
    assert!(origin(&ckpt).contains("is gone"));
    profile.header.model_source = None;
    placer_profile::save_checkpoint(&ckpt, &profile).expect("save");
    assert!(origin(&ckpt).contains("built in memory"));
    // A carried model that is not the profiled one is damage, said on one line.
    profile.model_json = Some(other.to_json());
    placer_profile::save_checkpoint(&ckpt, &profile).expect("save");
    let err = placer_profile::profiled(&ckpt).expect_err("damaged").to_string();
    assert!(err.contains("damaged: the model it carries") && !err.contains('\n'), "{err}");
}

#[test]
fn a_named_model_gets_its_own_most_recent_checkpoint() {
    let dir = tempfile::tempdir().expect("temp dir");
    let model = placer_zoo::build("lenet-mnist", 2).expect("zoo");
    let ckpts = dir.path().join("ckpts");
    // No directory, then nothing of this model's: none, not an error.
    assert_eq!(placer_profile::latest_of(&ckpts, &model).expect("no directory"), None);
    let ours = |name: &str, age: u64| {
        let mut profile = common::profile(model.name(), 3);
        profile.header.model_hash = model.content_hash();
        let path = ckpts.join(name);
        placer_profile::save_checkpoint(&path, &profile).expect("save");
        touch(&path, age);
        path
    };
    placer_profile::save_checkpoint(&ckpts.join("other.ckpt"), &common::profile("another-model", 3)).expect("save");
    std::fs::write(ckpts.join("notes.ckpt"), "not a checkpoint").expect("write");
    assert_eq!(placer_profile::latest_of(&ckpts, &model).expect("none of it"), None);
    // The newest of this model's, though another model's is newer still.
    ours("old.ckpt", 300);
    let newer = ours("newer.ckpt", 100);
    touch(&ckpts.join("other.ckpt"), 10);
    assert_eq!(placer_profile::latest_of(&ckpts, &model).expect("found"), Some(newer.clone()));
    // A damaged file bearing a name `placer profile` gives this model stops the search
    // when it is the newest; behind a readable one of this model it is never reached.
    let stem = placer_profile::checkpoint_stem(model.name(), &model.content_hash());
    let damaged = ckpts.join(format!("{stem}sim64.ckpt"));
    std::fs::write(&damaged, "placer-profile\n").expect("write");
    touch(&damaged, 200);
    assert_eq!(placer_profile::latest_of(&ckpts, &model).expect("found"), Some(newer));
    touch(&damaged, 1);
    let err = placer_profile::latest_of(&ckpts, &model).expect_err("damaged").to_string();
    assert!(err.contains(&damaged.display().to_string()), "{err}");
}
