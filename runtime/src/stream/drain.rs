//! The writer thread: output rows of batch k − 1 are written while batch k runs.

use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use super::{NpyRowWriter, StreamError};
use crate::io::IoError;

/// Owns the output writers on a thread of its own. The running thread copies each batch's
/// output rows into one of two recycled buffers per output ([`Drain::send`]) and goes on;
/// the writer thread appends them to the files and hands the buffers back. So at most two
/// batches of output rows are staged (double buffering), and the copy is the only writing
/// the running thread does.
pub struct Drain {
    to_writer: Option<SyncSender<(usize, Vec<u8>)>>,
    free: Receiver<Vec<u8>>,
    handle: Option<JoinHandle<Result<Vec<NpyRowWriter>, IoError>>>,
}

impl Drain {
    /// Starts the writer thread over `writers` (one per graph output, in order).
    pub fn start(writers: Vec<NpyRowWriter>) -> Result<Drain, StreamError> {
        let n = writers.len().max(1);
        let (to_writer, batches) = sync_channel::<(usize, Vec<u8>)>(2 * n);
        let (give_back, free) = channel();
        for _ in 0..2 * n {
            // The receiver is alive (held below): cannot fail.
            let _ = give_back.send(Vec::new());
        }
        let handle = std::thread::Builder::new()
            .name("arenac-writer".into())
            .spawn(move || {
                let mut writers = writers;
                for (i, buf) in batches {
                    if let Some(w) = writers.get_mut(i) {
                        w.write_rows(&buf)?;
                    }
                    let _ = give_back.send(buf);
                }
                Ok(writers)
            })
            .map_err(|e| StreamError::Input(format!("cannot start the writer thread: {e}")))?;
        Ok(Drain {
            to_writer: Some(to_writer),
            free,
            handle: Some(handle),
        })
    }

    /// Queues a copy of output `output`'s rows; waits only when both of its buffers are
    /// still being written. A failed write (reported by the writer thread) is returned here
    /// or by [`Drain::finish`].
    pub fn send(&mut self, output: usize, bytes: &[u8]) -> Result<(), StreamError> {
        let Ok(mut buf) = self.free.recv() else {
            return Err(self.failure());
        };
        buf.clear();
        buf.extend_from_slice(bytes);
        let sent = self.to_writer.as_ref().map(|tx| tx.send((output, buf)));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self.failure()),
        }
    }

    /// Waits for every queued row to be written and returns the writers.
    pub fn finish(mut self) -> Result<Vec<NpyRowWriter>, StreamError> {
        self.to_writer = None;
        self.join()
    }

    /// The writer thread's error (it stopped early).
    fn failure(&mut self) -> StreamError {
        self.to_writer = None;
        match self.join() {
            Err(e) => e,
            Ok(_) => StreamError::Input("the writer thread stopped early".into()),
        }
    }

    fn join(&mut self) -> Result<Vec<NpyRowWriter>, StreamError> {
        let handle = self
            .handle
            .take()
            .ok_or_else(|| StreamError::Input("the writer thread already stopped".into()))?;
        match handle.join() {
            Ok(result) => Ok(result?),
            Err(_) => Err(StreamError::Input("the writer thread panicked".into())),
        }
    }
}

impl Drop for Drain {
    /// Unfinished (an error elsewhere): stop the thread and wait for it, so its writers are
    /// dropped (their partial files removed) before this returns.
    fn drop(&mut self) {
        self.to_writer = None;
        if self.handle.is_some() {
            let _ = self.join();
        }
    }
}
