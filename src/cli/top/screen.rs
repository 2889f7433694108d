//! `top`'s terminal: raw mode and the alternate screen, put back on every way out,
//! and the loop that draws, reads keys and refreshes.

use super::app::{key, refresh, App};
use super::keys::{self, Key};
use super::source::{Source, Sources};
use super::{view, TICK};
use crate::device::values::monotonic_ns;
use crate::error::{Error, Result};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::Terminal;
use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sets up the terminal (raw mode, alternate screen, hidden cursor), runs `f`, and
/// puts the terminal back whatever happens, a panic included.
pub(crate) fn with_terminal(
    f: impl FnOnce(&mut Terminal<CrosstermBackend<Stdout>>) -> Result<()>,
) -> Result<()> {
    let io_err = |e: io::Error| Error::Io {
        message: format!("the terminal: {e} (bfperf top needs a terminal)"),
        source: e,
    };
    terminal::enable_raw_mode().map_err(io_err)?;
    let _back = TerminalBack;
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        leave_terminal();
        previous(info);
    }));
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide).map_err(io_err)?;
    // Never dropped: ratatui's drop shows the cursor and reports a failure on standard
    // error in a way that panics when the terminal is gone; leave_terminal shows it,
    // ignoring a dead terminal.
    let mut term = std::mem::ManuallyDrop::new(
        Terminal::new(CrosstermBackend::new(io::stdout())).map_err(io_err)?,
    );
    f(&mut term)
}

pub(crate) fn leave_terminal() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
}

/// Leaves the alternate screen on every way out of `with_terminal`.
pub(crate) struct TerminalBack;

impl Drop for TerminalBack {
    fn drop(&mut self) {
        leave_terminal();
    }
}

pub(crate) fn event_loop(
    term: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
    sources: &mut Sources,
) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    // True while the terminal is there: one that hung up answers writes with EIO, and
    // top then ends as when it sees the hangup.
    let draw = |term: &mut Terminal<CrosstermBackend<Stdout>>, app: &App| match term
        .draw(|f| view::draw(f, app))
    {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EIO | libc::ENXIO | libc::EPIPE)
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(Error::Io {
            message: format!("drawing the screen: {e}"),
            source: e,
        }),
    };
    // A first sample now, so the first refresh has an interval behind it.
    sources.watch.sample(monotonic_ns());
    let mut next = Instant::now() + app.interval.min(Duration::from_millis(500));
    let mut last_tick = Instant::now();
    let mut terminal = TerminalWatch { carry: Vec::new() };
    // False once the terminal is gone: the loop ends as on a hangup.
    let mut shown = draw(term, app)?;
    while shown && !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= next {
            if !app.paused {
                refresh(app, sources);
            }
            next = now + app.interval;
            shown = draw(term, app)?;
        } else if now.duration_since(last_tick) >= TICK {
            if let Source::Live(Some(e)) = sources.device {
                let _ = e.sweep(monotonic_ns());
            }
            last_tick = now;
        }
        let wait = next.saturating_duration_since(Instant::now()).min(TICK);
        match terminal.wait(wait) {
            Tty::Gone => return Ok(()),
            Tty::Quiet => continue,
            Tty::Input(keys) => {
                if keys.into_iter().any(|k| key(app, k)) {
                    return Ok(());
                }
            }
        }
        shown = draw(term, app)?;
    }
    Ok(())
}

/// What the terminal did while top waited.
pub(crate) enum Tty {
    /// Keys pressed.
    Input(Vec<Key>),
    /// Nothing in the time waited.
    Quiet,
    /// Hung up or closed: top ends, and puts the device back.
    Gone,
}

/// Watches standard input (the terminal) for keys and for its end, with poll(2) and
/// read(2): nothing here can wait longer than asked, whatever the terminal does.
pub(crate) struct TerminalWatch {
    /// The start of a character a read cut off.
    pub(crate) carry: Vec<u8>,
}

impl TerminalWatch {
    /// Waits up to `wait` for keys (or the terminal's end) on standard input.
    pub(crate) fn wait(&mut self, wait: Duration) -> Tty {
        let mut fd = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one pollfd, owned here, for the duration of the call.
        let n = unsafe { libc::poll(&mut fd, 1, ms) };
        if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return Tty::Gone;
        }
        // Nothing (or EINTR: a signal, whose flag the loop reads).
        if n <= 0 || fd.revents & libc::POLLIN == 0 {
            return Tty::Quiet;
        }
        let mut buf = [0u8; 256];
        // SAFETY: reads at most buf.len() bytes into buf, which lives across the call;
        // poll said it is readable, so it does not block.
        let got = unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), buf.len()) };
        match got {
            // The end of the file, or a terminal that hung up (EIO).
            0 => Tty::Gone,
            n if n < 0 => match io::Error::last_os_error().kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Tty::Quiet,
                _ => Tty::Gone,
            },
            n => Tty::Input(keys::decode(&buf[..n as usize], &mut self.carry)),
        }
    }
}
