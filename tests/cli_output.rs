//! Output that cannot be written: a reader that closes the pipe early (`placer ... | head`)
//! ends the command quietly with 0, as ripgrep does; any other failure to write standard
//! output (a full disk) is one `error:` line and exit 1. Neither may panic.

use std::io::Read as _;
use std::process::{Output, Stdio};

mod common;
use common::{command, text};

/// A model whose JSON (about 3 MB) is far larger than any pipe's buffer, so writing it
/// to a pipe nobody reads must fail with EPIPE rather than fit in the buffer.
const BIG: &[&str] = &["zoo", "densenet264", "--batch", "1"];

/// `placer ARGS` with stdout a pipe whose read end is closed after reading `read` bytes.
fn with_reader_gone(args: &[&str], read: usize) -> Output {
    let mut child = command().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("placer starts");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut head = vec![0; read];
    stdout.read_exact(&mut head).expect("the first bytes arrive");
    drop(stdout);
    child.wait_with_output().expect("placer ends")
}

fn assert_quiet_success(out: &Output) {
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{:?}: {err}", out.status);
    assert!(err.is_empty(), "a closed pipe must end the command without a word: {err}");
}

#[test]
fn a_reader_closing_the_pipe_before_any_output_ends_the_command_quietly() {
    assert_quiet_success(&with_reader_gone(BIG, 0));
}

#[test]
fn a_reader_closing_the_pipe_mid_output_ends_the_command_quietly() {
    // Like `| head -c 4096`: the model is being written when the reader goes.
    let out = with_reader_gone(BIG, 4096);
    assert_quiet_success(&out);
}

#[test]
fn a_reader_closing_the_pipe_on_line_by_line_output_ends_the_command_quietly() {
    assert_quiet_success(&with_reader_gone(&["zoo", "--list"], 0));
}

/// `placer ARGS` with stdout, or stderr, the full device: every write fails with ENOSPC.
#[cfg(target_os = "linux")]
fn into_dev_full(args: &[&str], stderr_too: bool) -> Output {
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full opens");
    let mut cmd = command();
    cmd.args(args).stdout(full());
    if stderr_too {
        cmd.stderr(full());
    }
    cmd.output().expect("placer runs")
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_disk_under_stdout_is_one_error_line_and_exit_1() {
    // One large write (the model) and small line-by-line ones (the list).
    for args in [BIG, &["zoo", "mlp", "--batch", "1"], &["zoo", "--list"]] {
        let out = into_dev_full(args, false);
        let err = text(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one-line error: {err}");
        assert!(err.starts_with("error: cannot write to standard output:"), "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn an_unwritable_stderr_does_not_change_the_exit_code() {
    // The error line cannot be written, but its exit code still tells (2: bad input),
    // where a panic would exit 101.
    assert_eq!(into_dev_full(&["zoo", "resnet51"], true).status.code(), Some(2));
    let out = into_dev_full(&["zoo", "mlp", "--batch", "1"], true);
    assert_eq!(out.status.code(), Some(1));
}
