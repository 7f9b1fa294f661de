//! How every binary hears that it must stop: SIGTERM (how orchestrators and
//! `systemd` stop a service) or SIGINT (Ctrl-C). The query service drains on
//! the first; the ranker and the daemon finish the products in flight on the
//! first and exit at once on a second, for an operator who cannot wait.

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::exit::ExitStatus;

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
