//! The file driver: offline rendering from a WAV file to a WAV file
//! (`resoundd -d file`).
//!
//! Capture channel `c` reads the input's channel `c`, playback channel `c`
//! is written to the output's channel `c`. The driver models a card with one
//! period of buffering each way, which is what the server reports as port
//! latencies: the input reaches the capture ports one period late (the first
//! cycle captures silence) and the output file starts with one period of
//! silence before the first cycle's playback, so a signal passed straight
//! through comes out `2 × period` frames later (sync mode, and every
//! freewheeling render), `3 × period` in async mode with `--realtime`. The
//! output holds the input's length plus that latency, so the whole input
//! comes through; the period used is the one at start.
//!
//! Pacing: freewheeling, cycles run back to back ([`Driver::wait`] does not
//! sleep; the engine waits for the whole graph each cycle); otherwise on
//! the clock like the dummy driver. Before [`RenderControl::start`] the
//! driver *holds*: cycles run on the clock with silent capture and nothing
//! is read or written, so clients can connect and wire the graph first.
//! When the output has its full length, `wait` reports
//! [`Fault::EndOfStream`]; [`Driver::stop`] then finalises the file and
//! publishes the outcome in [`RenderControl`].
//!
//! The samples travel through lock-free rings filled and drained by helper
//! threads (the `io` module); the driver thread only copies floats, and waits on a
//! ring (a futex) only when a helper thread is behind.
//!
//! Runs on the driver thread (real-time); `create` and `open` at start-up,
//! `stop` after the last cycle.

pub mod format;
mod io;
mod rings;

use super::pace::Pacer;
use super::{Driver, Fault, Latencies, Period, Wake};
use crate::clock::Clock;
pub use format::{probe_input, InputInfo, SampleFormat};
use io::{ReaderJob, WriterJob};
use resound_shm::sync::Ordering;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What to render (decided by the server's command line).
#[derive(Debug, Clone)]
pub struct FileSpec {
    /// Input file; None: silent capture for `frames` frames.
    pub input: Option<PathBuf>,
    /// Output file (created or truncated at start-up).
    pub output: PathBuf,
    /// Output sample format (None: the input's, else float).
    pub output_format: Option<SampleFormat>,
    /// Capture channels (`system:capture_N`).
    pub capture: usize,
    /// Playback channels (`system:playback_N`), the output's channels.
    pub playback: usize,
    /// Sample rate (Hz).
    pub rate: u32,
    /// Length to render without input (frames).
    pub frames: u64,
    /// Frames per period at start: the capture and playback latency.
    pub period: u32,
    /// The engine adds a period of its own (async mode, not freewheeling).
    pub async_period: bool,
}

/// Shared between the driver thread and the server's control side.
#[derive(Debug, Default)]
pub struct RenderControl {
    /// Rendering may begin (set once; the driver holds until then).
    start: AtomicBool,
    /// The driver reached the end of the stream.
    ended: AtomicBool,
    /// Filled by [`Driver::stop`]: frames written, or what went wrong.
    outcome: Mutex<Option<Result<u64, String>>>,
}

impl RenderControl {
    /// Lets rendering begin at the next cycle.
    pub fn start(&self) {
        self.start.store(true, Ordering::Release);
    }
    /// Whether rendering was allowed to begin.
    pub fn started(&self) -> bool {
        self.start.load(Ordering::Acquire)
    }
    /// Whether the whole input was rendered (the driver stopped the engine).
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
    /// The outcome once the output file is finalised: frames written, or an error.
    pub fn outcome(&self) -> Option<Result<u64, String>> {
        self.outcome
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The helper threads, between `open` and `stop`.
struct Helpers {
    reader: Option<JoinHandle<Result<(), String>>>,
    writer: JoinHandle<Result<u64, String>>,
    stop_reader: Arc<AtomicBool>,
}

/// The offline driver (see the module docs).
pub struct FileDriver {
    spec: FileSpec,
    control: Arc<RenderControl>,
    /// Opened at start-up; moved to the helper threads in `open`.
    jobs: Option<(Option<ReaderJob>, WriterJob)>,
    helpers: Option<Helpers>,
    rings: rings::Rings,
    pacer: Pacer,
    /// The driver is rendering (it started and has not reached the end).
    rendering: bool,
    /// Frames of playback to commit at the next wait (0: none).
    pending: usize,
    /// Capture frames delivered since rendering began (the lead included).
    cap_pos: u64,
    /// Output frames committed (the lead included).
    committed: u64,
    /// Input frames (or the length to render without input).
    input_frames: u64,
    /// The output's full length (frames).
    out_len: u64,
    finished: bool,
}

impl FileDriver {
    /// Opens the input and creates the output (not real-time). Errors say
    /// which file and why, before any client connects.
    pub fn create(spec: FileSpec, max_frames: usize) -> Result<FileDriver, String> {
        let (reader, in_channels, input_frames) = match &spec.input {
            Some(path) => {
                let info = probe_input(path)?;
                let wav = format::open_input(path)?;
                (
                    Some((wav, info.format)),
                    info.channels as usize,
                    info.frames,
                )
            }
            None => (None, 0, spec.frames),
        };
        let out_format = spec
            .output_format
            .or(reader.as_ref().map(|r| r.1))
            .unwrap_or(SampleFormat::F32);
        let channels = u16::try_from(spec.playback.max(1))
            .map_err(|_| format!("{} output channels are too many", spec.playback))?;
        let wav = hound::WavWriter::create(&spec.output, out_format.spec(channels, spec.rate))
            .map_err(|e| format!("cannot create output {}: {e}", spec.output.display()))?;
        let ring_frames = (spec.rate as usize).max(4 * max_frames);
        let (rings, in_tx, out_rx) = rings::Rings::new(
            spec.capture,
            in_channels,
            spec.playback.max(1),
            max_frames,
            ring_frames,
        );
        let (p, lat) = (spec.period as u64, latency_frames(&spec));
        let reader = reader.map(|(wav, format)| ReaderJob {
            wav,
            format,
            tx: in_tx,
            progress: rings.in_progress.clone(),
            stop: Arc::new(AtomicBool::new(false)),
        });
        let writer = WriterJob {
            wav,
            format: out_format,
            rx: out_rx,
            progress: rings.out_progress.clone(),
            lead_frames: p,
            max_frames: input_frames + lat,
        };
        Ok(FileDriver {
            control: Arc::new(RenderControl::default()),
            jobs: Some((reader, writer)),
            helpers: None,
            rings,
            pacer: Pacer::default(),
            rendering: false,
            pending: 0,
            cap_pos: 0,
            committed: p,
            input_frames,
            out_len: input_frames + lat,
            finished: false,
            spec,
        })
    }

    /// The control shared with the server (start trigger, outcome).
    pub fn control(&self) -> Arc<RenderControl> {
        self.control.clone()
    }

    /// Frames from a capture port's input to the same output frame in the
    /// file: capture, playback and (async) the engine's own period.
    pub fn latency_frames(&self) -> u64 {
        latency_frames(&self.spec)
    }

    fn spawn_helpers(&mut self) -> Result<(), String> {
        let Some((reader, writer)) = self.jobs.take() else {
            return Ok(());
        };
        let spawn_err = |e: std::io::Error| format!("file driver thread: {e}");
        let stop_reader = reader
            .as_ref()
            .map_or_else(|| Arc::new(AtomicBool::new(true)), |r| r.stop.clone());
        let reader = match reader {
            Some(r) => Some(
                std::thread::Builder::new()
                    .name("resound-file-reader".into())
                    .spawn(move || r.run())
                    .map_err(spawn_err)?,
            ),
            None => {
                self.rings.in_progress.done.store(true, Ordering::Release);
                None
            }
        };
        let writer = std::thread::Builder::new()
            .name("resound-file-writer".into())
            .spawn(move || writer.run())
            .map_err(spawn_err)?;
        self.helpers = Some(Helpers {
            reader,
            writer,
            stop_reader,
        });
        Ok(())
    }

    /// Commits the previous cycle's playback to the output ring. Real-time safe.
    fn commit(&mut self, clock: &dyn Clock) {
        if self.pending == 0 {
            return;
        }
        let n = self.pending;
        self.pending = 0;
        self.rings.push_output(clock, n);
        self.committed += n as u64;
    }

    /// Fills this cycle's capture buffers: the lead's silence, then the
    /// input, then silence past its end. Real-time safe.
    fn fill_capture(&mut self, clock: &dyn Clock, frames: usize) {
        self.rings.clear_capture(frames);
        if !self.rendering {
            return;
        }
        let lead = self.spec.period as u64;
        let start = self.cap_pos;
        self.cap_pos += frames as u64;
        let from = start.max(lead);
        let to = self.cap_pos.min(lead + self.input_frames);
        if to > from {
            let offset = (from - start) as usize;
            self.rings.pull_input(clock, offset, (to - from) as usize);
        }
    }

    /// Ends the render: the engine stops at this fault. Real-time safe.
    fn end(&mut self) -> Result<Wake, Fault> {
        self.finished = true;
        self.control.ended.store(true, Ordering::Release);
        Err(Fault::EndOfStream)
    }
}

/// See [`FileDriver::latency_frames`].
fn latency_frames(spec: &FileSpec) -> u64 {
    let p = spec.period as u64;
    2 * p + if spec.async_period { p } else { 0 }
}

impl Driver for FileDriver {
    /// Starts the reader and writer threads (not real-time).
    fn open(&mut self, _max_frames: usize) -> Result<Latencies, Fault> {
        self.spawn_helpers().map_err(|_| Fault::Os(libc::EAGAIN))?;
        Ok(self.latencies())
    }

    fn start(&mut self, now_ns: u64) -> Result<(), Fault> {
        self.pacer.start(now_ns);
        Ok(())
    }

    /// Lets the writer finish and finalise the output, stops the reader, and
    /// publishes the outcome (not real-time).
    fn stop(&mut self) {
        let Some(h) = self.helpers.take() else { return };
        self.rings.close_output();
        h.stop_reader.store(true, Ordering::Release);
        let written = h
            .writer
            .join()
            .unwrap_or_else(|_| Err("the writer thread panicked".into()));
        let read = h.reader.map_or(Ok(()), |r| {
            r.join()
                .unwrap_or_else(|_| Err("the reader thread panicked".into()))
        });
        let outcome = read.and(written);
        *self
            .control
            .outcome
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(outcome);
    }

    /// Commits the last cycle's output, ends the render when the output is
    /// complete, paces the cycle and reads its capture. Real-time safe.
    fn wait(&mut self, clock: &dyn Clock, period: Period) -> Result<Wake, Fault> {
        if self.finished {
            return Err(Fault::EndOfStream);
        }
        self.commit(clock);
        if self.rendering && self.committed >= self.out_len {
            return self.end();
        }
        if !self.rendering && self.control.started() {
            self.rendering = true;
        }
        let w = self.pacer.pace(clock, period);
        self.fill_capture(clock, period.frames as usize);
        self.rings.clear_playback();
        if self.rendering {
            self.pending = period.frames as usize;
        }
        Ok(w)
    }

    /// This cycle's capture of `channel`. Real-time safe.
    fn capture(&mut self, channel: usize, dst: &mut [f32]) {
        self.rings.capture(channel, dst);
    }

    /// This cycle's playback of `channel` (the last call in a cycle counts).
    /// Real-time safe.
    fn playback(&mut self, channel: usize, src: &[f32]) {
        self.rings.playback(channel, src);
    }

    /// Nothing on top of the one period each way the server reports.
    /// Real-time safe.
    fn latencies(&self) -> Latencies {
        Latencies::default()
    }

    /// Yes: a render never runs ahead of a slow client. Real-time safe.
    fn freewheel_waits_for_graph(&self) -> bool {
        true
    }

    /// Only the end of the stream is a fault, and it is final. Real-time safe.
    fn recover(&mut self, fault: Fault) -> Result<(), Fault> {
        match fault {
            Fault::EndOfStream => Err(fault),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimClock;

    /// The driver alone, its capture handed straight back as playback: the
    /// output is the input two periods later, as long as input + latency.
    #[test]
    fn a_passthrough_comes_out_two_periods_later() {
        let dir = std::env::temp_dir().join(format!("resound-filedrv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (input, output) = (dir.join("in.wav"), dir.join("out.wav"));
        let mut w = hound::WavWriter::create(&input, SampleFormat::S16.spec(1, 48000)).unwrap();
        for i in 0..1000i32 {
            w.write_sample((i * 13 % 60000 - 30000) as i16).unwrap();
        }
        w.finalize().unwrap();
        let spec = FileSpec {
            input: Some(input.clone()),
            output: output.clone(),
            output_format: None,
            capture: 1,
            playback: 1,
            rate: 48000,
            frames: 0,
            period: 64,
            async_period: false,
        };
        let mut d = FileDriver::create(spec, 64).unwrap();
        d.control().start();
        let clock = SimClock::default();
        d.open(64).unwrap();
        d.start(clock.now_ns()).unwrap();
        let period = Period {
            frames: 64,
            rate: 48000,
            freewheel: true,
        };
        let mut buf = [0.0f32; 64];
        let mut cycles = 0;
        while d.wait(&clock, period).is_ok() {
            d.capture(0, &mut buf);
            d.playback(0, &buf);
            cycles += 1;
            assert!(cycles < 100, "the render does not end");
        }
        assert!(d.control().ended());
        d.stop();
        assert_eq!(d.control().outcome(), Some(Ok(1000 + 128)));
        let inp: Vec<i16> = hound::WavReader::open(&input)
            .unwrap()
            .samples::<i16>()
            .map(|s| s.unwrap())
            .collect();
        let out: Vec<i16> = hound::WavReader::open(&output)
            .unwrap()
            .samples::<i16>()
            .map(|s| s.unwrap())
            .collect();
        assert_eq!(out.len(), 1128);
        assert!(out[..128].iter().all(|&s| s == 0));
        assert_eq!(&out[128..], &inp[..]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
