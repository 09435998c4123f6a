//! Everything the CLI prints, written without panicking.
//!
//! `print!` and `println!` panic when a write fails: when the reader of a pipe has gone
//! (`placer zoo resnet50 | head`) or when standard output is a full disk. So every verb
//! writes standard output with `out!` and `outln!`, which take `print!`'s arguments and
//! return an `io::Result<()>` to pass on with `?`; `main` flushes what is left at the
//! end, and `exit::report` ends quietly with 0 on a broken pipe and reports any other
//! failure as one `error:` line. Standard error (`errln!`) is written as well as it can
//! be: when it fails there is nowhere left to say so.
//!
//! The crate does not allow `clippy::print_stdout` or `clippy::print_stderr`, so a
//! `println!` that bypasses this module shows up in `cargo clippy`.

use std::fmt;
use std::io::{self, Write as _};

/// Writes to standard output, like `print!`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!($($arg)*))
    };
}

/// Writes a line to standard output, like `println!`.
macro_rules! outln {
    () => {
        $crate::out::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes a line to standard error, like `eprintln!`, ignoring failure.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// What `out!` and `outln!` expand to. The error keeps its kind (a broken pipe stays
/// `ErrorKind::BrokenPipe`) and says it was standard output that failed.
pub fn stdout(args: fmt::Arguments<'_>) -> io::Result<()> {
    io::stdout().lock().write_fmt(args).map_err(on_stdout)
}

/// Flushes standard output. `main` calls it after a verb succeeds, so that the end of
/// the output (a last line without its newline) fails where it can be reported, not in
/// the flush at exit, which ignores errors.
pub fn flush() -> io::Result<()> {
    io::stdout().lock().flush().map_err(on_stdout)
}

fn on_stdout(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
}

/// What `errln!` expands to.
pub fn stderr(args: fmt::Arguments<'_>) {
    // Standard error is where failures are reported: when it fails itself (closed, a
    // broken pipe), there is no better place left, and the exit code still tells.
    let _ = io::stderr().lock().write_fmt(args);
}

/// Standard output written from inside a library's callback, which cannot return an
/// error: the first failure is kept, and `result` hands it back once the library has
/// returned. Writes after a failure are still attempted and fail the same way (a closed
/// pipe stays closed); the library's work is not interrupted.
#[derive(Debug, Default)]
pub struct Deferred(Option<io::Error>);

impl Deferred {
    /// Keeps `written`'s error unless an earlier one is kept already.
    pub fn keep(&mut self, written: io::Result<()>) {
        if let (None, Err(e)) = (&self.0, written) {
            self.0 = Some(e);
        }
    }

    /// The first failure kept, if any.
    pub fn result(self) -> io::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}
