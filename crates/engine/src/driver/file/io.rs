//! The file driver's two helper threads: the reader fills a lock-free ring
//! with the input's samples (converted to interleaved floats), the writer
//! drains the output ring into the WAV file and finalises its header.
//!
//! The input is streamed, not preloaded: a multi-gigabyte file needs no more
//! memory than the ring (about a second of audio), and the driver thread
//! only copies floats out of and into the rings. Each thread bumps a futex
//! word ([`Progress`]) after every block it moves, so the driver can wait for
//! it (only while freewheeling or when the reader fell behind).
//!
//! Threads: `resound-file-reader` and `resound-file-writer` (not real-time).

use super::format::SampleFormat;
use resound_shm::sync::{futex, AtomicU32, Ordering};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Frames the reader converts per block.
const BLOCK_FRAMES: usize = 4096;
/// How long a helper thread sleeps when its ring is full (reader) or empty (writer).
const IDLE: Duration = Duration::from_millis(1);

/// A helper thread's progress, as the driver thread sees it.
#[derive(Debug, Default)]
pub(super) struct Progress {
    /// Bumped (and futex-woken) after every block moved.
    pub(super) word: AtomicU32,
    /// The thread has finished (end of file, error, or told to stop).
    pub(super) done: AtomicBool,
}

impl Progress {
    fn bump(&self) {
        futex::bump_and_wake(&self.word);
    }

    fn finish(&self) {
        self.done.store(true, Ordering::Release);
        self.bump();
    }
}

/// The reader thread's input.
pub(super) struct ReaderJob {
    pub(super) wav: hound::WavReader<BufReader<File>>,
    pub(super) format: SampleFormat,
    pub(super) tx: rtrb::Producer<f32>,
    pub(super) progress: Arc<Progress>,
    /// Set by the driver when it stops early.
    pub(super) stop: Arc<AtomicBool>,
}

impl ReaderJob {
    /// Reads the whole file block by block into the ring. Returns an error
    /// message if the file ends early or cannot be read.
    pub(super) fn run(mut self) -> Result<(), String> {
        let channels = self.wav.spec().channels as usize;
        let mut block = Vec::with_capacity(BLOCK_FRAMES * channels);
        let result = loop {
            block.clear();
            if let Err(e) = self.read_block(&mut block, BLOCK_FRAMES * channels) {
                break Err(e);
            }
            if block.is_empty() || !self.push(&block) {
                break Ok(());
            }
        };
        self.progress.finish();
        result
    }

    /// Converts up to `n` samples into `block`.
    fn read_block(&mut self, block: &mut Vec<f32>, n: usize) -> Result<(), String> {
        let f = self.format;
        let err = |e: hound::Error| format!("reading the input: {e}");
        if f == SampleFormat::F32 {
            for s in self.wav.samples::<f32>().take(n) {
                block.push(s.map_err(err)?);
            }
        } else {
            for s in self.wav.samples::<i32>().take(n) {
                block.push(f.int_to_f32(s.map_err(err)?));
            }
        }
        Ok(())
    }

    /// Pushes a block once the ring has room; false if told to stop.
    fn push(&mut self, block: &[f32]) -> bool {
        while self.tx.slots() < block.len() {
            if self.stop.load(Ordering::Acquire) || self.tx.is_abandoned() {
                return false;
            }
            std::thread::sleep(IDLE);
        }
        let mut chunk = self.tx.write_chunk(block.len()).expect("room checked");
        let (a, b) = chunk.as_mut_slices();
        a.copy_from_slice(&block[..a.len()]);
        b.copy_from_slice(&block[a.len()..]);
        chunk.commit_all();
        self.progress.bump();
        true
    }
}

/// The writer thread's input.
pub(super) struct WriterJob {
    pub(super) wav: hound::WavWriter<BufWriter<File>>,
    pub(super) format: SampleFormat,
    pub(super) rx: rtrb::Consumer<f32>,
    pub(super) progress: Arc<Progress>,
    /// Frames of silence written first (the driver's playback latency).
    pub(super) lead_frames: u64,
    /// The output's full length in frames; anything beyond is dropped.
    pub(super) max_frames: u64,
}

impl WriterJob {
    /// Writes until the driver drops its end of the ring, then finalises the
    /// WAV header. Returns the frames written.
    pub(super) fn run(mut self) -> Result<u64, String> {
        let result = self.write_all();
        self.progress.finish();
        let frames = result?;
        self.wav
            .finalize()
            .map_err(|e| format!("finishing the output: {e}"))?;
        Ok(frames)
    }

    fn write_all(&mut self) -> Result<u64, String> {
        let channels = self.wav.spec().channels as u64;
        let limit = self.max_frames * channels;
        let mut written = 0u64;
        for _ in 0..self.lead_frames.min(self.max_frames) * channels {
            self.write(0.0)?;
            written += 1;
        }
        loop {
            let n = self.rx.slots();
            if n == 0 {
                if self.rx.is_abandoned() && self.rx.slots() == 0 {
                    break;
                }
                std::thread::sleep(IDLE);
                continue;
            }
            let chunk = self.rx.read_chunk(n).expect("slots counted");
            let (a, b) = chunk.as_slices();
            for &x in a.iter().chain(b) {
                if written < limit {
                    Self::write_one(&mut self.wav, self.format, x)?;
                    written += 1;
                }
            }
            chunk.commit_all();
            self.progress.bump();
        }
        Ok(written / channels.max(1))
    }

    fn write(&mut self, x: f32) -> Result<(), String> {
        Self::write_one(&mut self.wav, self.format, x)
    }

    fn write_one(
        wav: &mut hound::WavWriter<BufWriter<File>>,
        format: SampleFormat,
        x: f32,
    ) -> Result<(), String> {
        let r = match format {
            SampleFormat::F32 => wav.write_sample(x),
            f => wav.write_sample(f.f32_to_int(x)),
        };
        r.map_err(|e| format!("writing the output: {e}"))
    }
}
