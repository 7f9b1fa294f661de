//! How every binary runs and stops: [`run_main`] runs its `main` and ends
//! it in the order the export of spans needs, and SIGTERM (how orchestrators
//! and `systemd` stop a service) or SIGINT (Ctrl-C) tells it to stop. The
//! query service drains on the first; the ranker and the daemon finish the
//! products in flight on the first and exit at once on a second, for an
//! operator who cannot wait.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::exit::ExitStatus;

/// How long the end of a process waits for blocking calls still running
/// (an HBase call on the blocking pool) before it exits.
const BLOCKING_CALLS_AT_EXIT: Duration = Duration::from_secs(5);

/// Runs a binary's `main`: installs the logs and the export of spans
/// ([`crate::traces::init`]) as service `service_name`, runs `main` on a
/// multi-threaded tokio runtime, and ends the two in the order the export
/// needs; exits with `main`'s status.
///
/// A span is exported when it closes, and a span closes only once nothing
/// holds it, its children included. A task the work leaves running (one
/// that ends when its last handle is dropped, or one aborted but not yet
/// dropped by the runtime) still holds its span, and through it every span
/// above, up to the command's root: flushed before the task is gone, the
/// trace would arrive without its root. So the runtime, and every task on
/// it, goes first, and only then are the last spans sent. An HBase call
/// still running on the blocking pool after five seconds is left behind,
/// and the spans it holds with it.
///
/// That end takes up to ten seconds (blocking calls, then a collector that
/// does not answer), and the work's signal listeners go with its runtime:
/// a SIGTERM or SIGINT during it skips the rest and exits at once, still
/// with `main`'s status (the work is done; only its last spans are lost).
pub fn run_main(service_name: &'static str, main: impl Future<Output = ExitStatus>) -> ExitCode {
    let tracing = crate::traces::init(service_name);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the tokio runtime");
            eprintln!("{service_name}: cannot start the tokio runtime: {error}");
            return ExitStatus::Failure.into();
        }
    };
    let status = runtime.block_on(main);
    exit_on_a_signal(status);
    runtime.shutdown_timeout(BLOCKING_CALLS_AT_EXIT);
    drop(tracing);
    status.into()
}

/// Listens for SIGTERM and SIGINT on a thread and a runtime of its own, and
/// returns once it does: from then on either ends the process at once with
/// `status`.
fn exit_on_a_signal(status: ExitStatus) {
    let (listening, started) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().name("exit-on-signal".to_owned()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(error) => {
                let _ = listening.send(Err(error));
                return;
            }
        };
        let mut signals = {
            let _in_runtime = runtime.enter();
            ShutdownSignals::listen()
        };
        let _ = listening.send(Ok(()));
        let signal = runtime.block_on(signals.next());
        tracing::warn!(signal, "exiting at once, without the last spans");
        status.exit_now();
    });
    // A thread that panicked before it listened has nothing more to say.
    if let Err(error) = spawned.and_then(|_| started.recv().unwrap_or(Ok(()))) {
        tracing::warn!(%error, "cannot listen for signals while exiting");
    }
}

/// Listeners for SIGTERM and SIGINT, registered when made, so a signal that
/// arrives from then on is caught rather than ending the process.
#[derive(Debug)]
pub struct ShutdownSignals {
    terminate: Option<Signal>,
    interrupt: Option<Signal>,
}

impl ShutdownSignals {
    /// Starts listening. A signal that cannot be listened for (the runtime
    /// refused the handler) is logged, and the other one still stops the process.
    pub fn listen() -> ShutdownSignals {
        let listen = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(listener) => Some(listener),
            Err(error) => {
                tracing::error!(%error, signal = name, "cannot listen for the signal; only the other one stops the process");
                None
            }
        };
        ShutdownSignals {
            terminate: listen(SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    /// Waits for the next SIGTERM or SIGINT and returns its name.
    pub async fn next(&mut self) -> &'static str {
        async fn receive(listener: Option<&mut Signal>) {
            match listener {
                Some(listener) => {
                    // `None` means the runtime is shutting down: no signal will come.
                    if listener.recv().await.is_none() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        }
        let name = tokio::select! {
            () = receive(self.terminate.as_mut()) => "SIGTERM",
            () = receive(self.interrupt.as_mut()) => "SIGINT",
        };
        tracing::info!(signal = name, "shutdown signal received");
        name
    }
}

/// Listens now; on the first signal calls `stop` with the signal's name (to
/// begin a graceful stop), and on a second exits at once with
/// [`ExitStatus::Interrupted`], without waiting for the work in flight.
pub fn stop_on_signals(stop: impl FnOnce(&'static str) + Send + 'static) {
    let mut signals = ShutdownSignals::listen();
    tokio::spawn(async move {
        stop(signals.next().await);
        let second = signals.next().await;
        tracing::warn!(signal = second, "second signal: exiting now without waiting for the work in flight");
        ExitStatus::Interrupted.exit_now();
    });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Sends `signal` to this test process with the `kill` command.
    fn send_to_self(signal: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), std::process::id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    // One test for both signals: the listeners are process-wide, and a
    // signal raised while no listener exists would end the test binary.
    #[tokio::test]
    async fn sigterm_and_sigint_are_caught_and_named() {
        let mut signals = ShutdownSignals::listen();
        for (sent, expected) in [("TERM", "SIGTERM"), ("INT", "SIGINT")] {
            send_to_self(sent);
            let caught = tokio::time::timeout(Duration::from_secs(10), signals.next()).await;
            assert_eq!(caught, Ok(expected));
        }
        // Nothing else was sent, so nothing else is heard.
        assert!(tokio::time::timeout(Duration::from_millis(200), signals.next()).await.is_err());
    }
}
