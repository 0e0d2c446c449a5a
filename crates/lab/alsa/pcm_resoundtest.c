/*
 * resoundtest: a test sound card for alsa-lib, built on alsa-lib's external
 * I/O plugin interface (ioplug). It lets resound's tests run its ALSA driver
 * on a machine without a sound card or kernel sound support.
 *
 * It behaves like a card:
 *   - periods are paced on a timer (a timerfd is the poll descriptor; the
 *     position returned by `pointer` advances with CLOCK_MONOTONIC from
 *     `start`, a whole period at a time, like a DMA position seen at period
 *     interrupts), and a writer that falls behind (or a reader that does not
 *     keep up) gets a real xrun;
 *   - playback data is consumed, and written to `playback_file` if given
 *     (raw interleaved frames in the negotiated format, as handed over);
 *   - capture data is produced: silence, or the raw interleaved frames of
 *     `capture_file` (looping with `capture_loop true`, else silence after
 *     its end), read as the application takes them;
 *   - faults are injected from outside the process through a control file
 *     (`control`), checked once a period and in every non-real-time
 *     callback. Writing a word into it:
 *       xrun     the next `pointer` of every open stream returns -EPIPE;
 *       suspend  every running stream is suspended (-ESTRPIPE), and
 *                snd_pcm_resume() resumes it where it stopped;
 *       vanish   the device is gone: open, prepare, start, hw_params fail
 *                with -ENODEV and open streams are disconnected (-ENODEV),
 *                as long as the file says `vanish`;
 *       return   the device is back: new opens work (as with a USB card,
 *                a handle that saw the device vanish stays dead).
 *     One-shot words (xrun, suspend) act once per open stream for each
 *     write of the file (a write is recognised by the file's inode, size
 *     and modification time), so both directions of a card see them.
 *
 * Configuration (all fields optional):
 *   pcm.NAME {
 *       type resoundtest
 *       control "/path/control"       # fault requests
 *       formats [ "FLOAT_LE" "S32_LE" "S24_3LE" "S24_LE" "S16_LE" ]
 *       rates [ 44100 48000 ]         # default: any rate 8000..192000
 *       channels_min 1                # default 1
 *       channels_max 8                # default 32
 *       playback_file "/path/out.raw"
 *       capture_file "/path/in.raw"
 *       capture_loop false
 *       paced true                    # false: no timer, never blocks
 *       period_bytes_max 1048576      # the longest period offered (bytes)
 *       access "both"                 # "rw", "mmap" or "both": the access
 *                                     # types offered (mmap: alsa-lib's
 *                                     # ioplug keeps the mmap buffer and
 *                                     # calls `transfer` at commit/begin)
 *   }
 *   pcm_type.resoundtest { lib "/path/libasound_module_pcm_resoundtest.so" }
 *
 * Every callback runs on the thread of the application that calls alsa-lib.
 */
#define _GNU_SOURCE
#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIST 32

/* A version of the control file: changes with every write of it. */
struct ctl_version {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

typedef struct {
	snd_pcm_ioplug_t io;
	/* configuration */
	char *control;
	char *playback_path;
	char *capture_path;
	bool capture_loop;
	bool paced;
	/* state */
	int timer_fd;
	int play_fd;
	int cap_fd;
	bool cap_ended;
	off_t cap_size;
	struct ctl_version seen; /* last control-file version acted on */
	bool pending_xrun;
	bool pending_suspend;
	bool vanished;
	uint64_t start_ns;    /* CLOCK_MONOTONIC at base_frames */
	uint64_t base_frames; /* position at start_ns */
	uint64_t last_check_ns;
	snd_pcm_uframes_t boundary;
	char *scratch; /* one chunk of interleaved frames for file I/O */
	size_t scratch_bytes;
} rt_t;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t period_ns(const rt_t *rt)
{
	if (rt->io.rate == 0)
		return 0;
	return (uint64_t)rt->io.period_size * 1000000000ull / rt->io.rate;
}

/* ---- control file ---------------------------------------------------- */

static bool same_version(const struct ctl_version *a, const struct ctl_version *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Reads the control file's word and version; returns false if absent. */
static bool read_control(const char *path, char *word, size_t len, struct ctl_version *v)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ssize_t n;
	size_t i = 0;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return false;
	}
	n = read(fd, word, len - 1);
	close(fd);
	if (n < 0)
		n = 0;
	word[n] = 0;
	while (word[i] == ' ' || word[i] == '\t' || word[i] == '\n')
		i++;
	memmove(word, word + i, strlen(word + i) + 1);
	for (i = 0; word[i] && word[i] != ' ' && word[i] != '\n' && word[i] != '\t'; i++)
		;
	word[i] = 0;
	v->dev = st.st_dev;
	v->ino = st.st_ino;
	v->size = st.st_size;
	v->mtime = st.st_mtim;
	return true;
}

/* Whether the device is gone according to the control file at `path`. */
static bool control_says_vanished(const char *path)
{
	char word[32];
	struct ctl_version v;

	return path && read_control(path, word, sizeof(word), &v) && strcmp(word, "vanish") == 0;
}

/* Reads the control file and records what it asks for. */
static void check_control(rt_t *rt)
{
	char word[32];
	struct ctl_version v;
	bool fresh;

	if (!rt->control)
		return;
	rt->last_check_ns = now_ns();
	if (!read_control(rt->control, word, sizeof(word), &v))
		return;
	if (strcmp(word, "vanish") == 0)
		rt->vanished = true;
	fresh = !same_version(&v, &rt->seen);
	rt->seen = v;
	if (!fresh)
		return;
	if (strcmp(word, "xrun") == 0)
		rt->pending_xrun = true;
	else if (strcmp(word, "suspend") == 0)
		rt->pending_suspend = true;
}

/* Checks the control file at most once a period while running. */
static void check_control_periodically(rt_t *rt)
{
	if (rt->control && now_ns() - rt->last_check_ns >= period_ns(rt))
		check_control(rt);
}

/* ---- pacing ---------------------------------------------------------- */

/*
 * Frames the card has played or recorded since prepare: like a card's DMA
 * position seen at its period interrupts, it moves a whole period at a time.
 */
static uint64_t frames_now(const rt_t *rt)
{
	uint64_t dt = now_ns() - rt->start_ns;
	uint64_t frames = (uint64_t)((unsigned __int128)dt * rt->io.rate / 1000000000u);

	return rt->base_frames + frames / rt->io.period_size * rt->io.period_size;
}

/* Clears the timer's readable state (the count of expirations). */
static void drain_timer(rt_t *rt)
{
	uint64_t ticks;

	if (read(rt->timer_fd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		SNDERR("resoundtest: reading the timer: %s", strerror(errno));
}

/*
 * The position at which the application may read or write a period (the
 * kernel's avail_min rule): a playback stream needs a period of free space
 * (all of it when draining), a capture stream a period of data.
 */
static uint64_t wake_frames(const rt_t *rt)
{
	uint64_t appl = rt->io.appl_ptr, period = rt->io.period_size;

	if (rt->io.stream == SND_PCM_STREAM_CAPTURE)
		return appl + period;
	if (rt->io.state == SND_PCM_STATE_DRAINING)
		return appl;
	return appl + period > rt->io.buffer_size ? appl + period - rt->io.buffer_size : 0;
}

/* Arms the timer: its descriptor becomes readable when a period is ready. */
static void arm_timer(rt_t *rt)
{
	struct itimerspec its = { 0 };
	uint64_t target = wake_frames(rt), at = 1; /* 1 ns: already expired */
	uint64_t period = rt->io.period_size;

	if (rt->paced && target > rt->base_frames) {
		uint64_t periods = (target - rt->base_frames + period - 1) / period;
		at = rt->start_ns + (uint64_t)(((unsigned __int128)periods * period * 1000000000u +
						 rt->io.rate - 1) / rt->io.rate);
	}
	its.it_value.tv_sec = at / 1000000000ull;
	its.it_value.tv_nsec = at % 1000000000ull;
	drain_timer(rt);
	timerfd_settime(rt->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Makes the descriptor readable at once, so that a poller sees a fault. */
static void expire_timer(rt_t *rt)
{
	struct itimerspec its = { .it_value = { .tv_nsec = 1 } };

	timerfd_settime(rt->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void disarm_timer(rt_t *rt)
{
	struct itimerspec its = { 0 };

	drain_timer(rt);
	timerfd_settime(rt->timer_fd, 0, &its, NULL);
}

/* ---- callbacks ------------------------------------------------------- */

static int rt_start(snd_pcm_ioplug_t *io)
{
	rt_t *rt = io->private_data;

	check_control(rt);
	if (rt->vanished)
		return -ENODEV;
	rt->start_ns = now_ns();
	rt->base_frames = 0;
	arm_timer(rt);
	return 0;
}

static int rt_stop(snd_pcm_ioplug_t *io)
{
	rt_t *rt = io->private_data;

	disarm_timer(rt);
	return 0;
}

/* The unpaced position: playback consumes at once, capture is always full. */
static snd_pcm_sframes_t unpaced_pointer(rt_t *rt)
{
	uint64_t pos = rt->io.appl_ptr;

	if (rt->io.stream == SND_PCM_STREAM_CAPTURE)
		pos += rt->io.buffer_size;
	return (snd_pcm_sframes_t)(pos % rt->boundary);
}

/* Reports an xrun: alsa-lib puts the stream in the XRUN state. */
static snd_pcm_sframes_t xrun(rt_t *rt)
{
	expire_timer(rt); /* a poller wakes up and sees it */
	return -EPIPE;
}

static snd_pcm_sframes_t rt_pointer(snd_pcm_ioplug_t *io)
{
	rt_t *rt = io->private_data;
	uint64_t hw, appl = io->appl_ptr;

	check_control_periodically(rt);
	if (rt->vanished) {
		expire_timer(rt);
		snd_pcm_ioplug_set_state(io, SND_PCM_STATE_DISCONNECTED);
		return (snd_pcm_sframes_t)(io->hw_ptr % rt->boundary);
	}
	if (io->state != SND_PCM_STATE_RUNNING && io->state != SND_PCM_STATE_DRAINING)
		return (snd_pcm_sframes_t)(io->hw_ptr % rt->boundary);
	if (rt->pending_xrun) {
		rt->pending_xrun = false;
		return xrun(rt);
	}
	hw = rt->paced ? frames_now(rt) : (uint64_t)unpaced_pointer(rt);
	if (rt->pending_suspend) {
		rt->pending_suspend = false;
		rt->base_frames = hw;
		expire_timer(rt); /* a poller wakes up and sees the suspend */
		snd_pcm_ioplug_set_state(io, SND_PCM_STATE_SUSPENDED);
		return (snd_pcm_sframes_t)(hw % rt->boundary);
	}
	if (!rt->paced)
		return (snd_pcm_sframes_t)hw;
	if (io->stream == SND_PCM_STREAM_PLAYBACK && hw > appl) {
		if (io->state == SND_PCM_STATE_DRAINING)
			hw = appl; /* played to the end: alsa-lib stops the stream */
		else
			return xrun(rt); /* underrun: the writer fell behind */
	}
	if (io->stream == SND_PCM_STREAM_CAPTURE && hw > appl + io->buffer_size)
		return xrun(rt); /* overrun: the reader fell behind */
	arm_timer(rt);
	return (snd_pcm_sframes_t)(hw % rt->boundary);
}

static int rt_resume(snd_pcm_ioplug_t *io)
{
	rt_t *rt = io->private_data;

	check_control(rt);
	if (rt->vanished || io->state != SND_PCM_STATE_SUSPENDED)
		return rt->vanished ? -ENODEV : 0;
	rt->start_ns = now_ns();
	snd_pcm_ioplug_set_state(io, SND_PCM_STATE_RUNNING);
	arm_timer(rt);
	return 0;
}

/* Makes sure the scratch buffer holds `frames` frames. */
static int ensure_scratch(rt_t *rt, snd_pcm_uframes_t frames)
{
	size_t bytes = frames * snd_pcm_format_physical_width(rt->io.format) / 8 * rt->io.channels;
	char *p;

	if (bytes <= rt->scratch_bytes)
		return 0;
	p = realloc(rt->scratch, bytes);
	if (!p)
		return -ENOMEM;
	rt->scratch = p;
	rt->scratch_bytes = bytes;
	return 0;
}

/* Areas describing the interleaved scratch buffer, one per channel. */
static void scratch_areas(rt_t *rt, snd_pcm_channel_area_t *areas)
{
	unsigned int width = snd_pcm_format_physical_width(rt->io.format);
	unsigned int c;

	for (c = 0; c < rt->io.channels; c++) {
		areas[c].addr = rt->scratch;
		areas[c].first = c * width;
		areas[c].step = rt->io.channels * width;
	}
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Fills `n` bytes from the capture file (looping or silence after its end). */
static void read_capture(rt_t *rt, char *p, size_t n, size_t frame_bytes)
{
	while (n > 0 && rt->cap_fd >= 0 && !rt->cap_ended) {
		ssize_t r = read(rt->cap_fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (rt->capture_loop && rt->cap_size >= (off_t)frame_bytes &&
			    lseek(rt->cap_fd, 0, SEEK_SET) == 0)
				continue;
			rt->cap_ended = true;
			break;
		}
		p += r;
		n -= (size_t)r;
	}
	if (n > 0)
		snd_pcm_format_set_silence(rt->io.format, p,
					   (unsigned int)(n * 8 /
							  snd_pcm_format_physical_width(rt->io.format)));
}

static snd_pcm_sframes_t rt_transfer(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas,
				     snd_pcm_uframes_t offset, snd_pcm_uframes_t size)
{
	rt_t *rt = io->private_data;
	snd_pcm_channel_area_t sa[MAX_LIST];
	size_t frame_bytes = snd_pcm_format_physical_width(io->format) / 8 * io->channels;
	int err;

	if (rt->vanished)
		return -ENODEV;
	if (io->stream == SND_PCM_STREAM_PLAYBACK && rt->play_fd < 0)
		return (snd_pcm_sframes_t)size;
	err = ensure_scratch(rt, size);
	if (err < 0)
		return err;
	scratch_areas(rt, sa);
	if (io->stream == SND_PCM_STREAM_PLAYBACK) {
		snd_pcm_areas_copy(sa, 0, areas, offset, io->channels, size, io->format);
		err = write_all(rt->play_fd, rt->scratch, size * frame_bytes);
		if (err < 0)
			return err;
	} else {
		read_capture(rt, rt->scratch, size * frame_bytes, frame_bytes);
		snd_pcm_areas_copy(areas, offset, sa, 0, io->channels, size, io->format);
	}
	return (snd_pcm_sframes_t)size;
}

static int rt_prepare(snd_pcm_ioplug_t *io)
{
	rt_t *rt = io->private_data;

	check_control(rt);
	if (rt->vanished)
		return -ENODEV;
	rt->base_frames = 0; /* requests seen now act once the stream runs */
	rt->start_ns = now_ns();
	arm_timer(rt); /* playback: readable, the buffer is empty */
	return 0;
}

static int rt_hw_params(snd_pcm_ioplug_t *io, snd_pcm_hw_params_t *params)
{
	rt_t *rt = io->private_data;

	(void)params;
	check_control(rt);
	if (rt->vanished)
		return -ENODEV;
	if (io->channels > MAX_LIST)
		return -EINVAL;
	rt->boundary = io->buffer_size;
	while (rt->boundary * 2 <= LONG_MAX - io->buffer_size)
		rt->boundary *= 2;
	/* A transfer moves at most a buffer: no allocation once running. */
	return ensure_scratch(rt, io->buffer_size);
}

/* Frames the application may read or write now, from the card's position. */
static uint64_t card_avail(const rt_t *rt, uint64_t hw)
{
	uint64_t appl = rt->io.appl_ptr;

	if (rt->io.stream == SND_PCM_STREAM_PLAYBACK)
		return hw > appl ? rt->io.buffer_size : rt->io.buffer_size - (appl - hw);
	return hw > appl ? hw - appl : 0;
}

static int rt_poll_revents(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int nfds,
			   unsigned short *revents)
{
	rt_t *rt = io->private_data;
	uint64_t hw;
	bool ready;

	(void)pfd;
	(void)nfds;
	check_control_periodically(rt);
	*revents = 0;
	if (rt->vanished && io->state != SND_PCM_STATE_OPEN && io->state != SND_PCM_STATE_SETUP)
		snd_pcm_ioplug_set_state(io, SND_PCM_STATE_DISCONNECTED);
	if (rt->vanished || io->state == SND_PCM_STATE_SUSPENDED ||
	    io->state == SND_PCM_STATE_DISCONNECTED || io->state == SND_PCM_STATE_XRUN) {
		*revents = POLLERR;
		return 0;
	}
	if (io->state != SND_PCM_STATE_RUNNING && io->state != SND_PCM_STATE_DRAINING)
		ready = io->stream == SND_PCM_STREAM_PLAYBACK;
	else if (!rt->paced || rt->pending_xrun || rt->pending_suspend)
		ready = true; /* the next pointer call reports it */
	else {
		hw = frames_now(rt);
		arm_timer(rt);
		ready = card_avail(rt, hw) >= io->period_size || io->state == SND_PCM_STATE_DRAINING;
	}
	if (ready)
		*revents = io->stream == SND_PCM_STREAM_PLAYBACK ? POLLOUT : POLLIN;
	return 0;
}

static int rt_close(snd_pcm_ioplug_t *io)
{
	rt_t *rt = io->private_data;

	if (rt->timer_fd >= 0)
		close(rt->timer_fd);
	if (rt->play_fd >= 0)
		close(rt->play_fd);
	if (rt->cap_fd >= 0)
		close(rt->cap_fd);
	free(rt->control);
	free(rt->playback_path);
	free(rt->capture_path);
	free(rt->scratch);
	free(rt);
	return 0;
}

static const snd_pcm_ioplug_callback_t rt_callback = {
	.start = rt_start,
	.stop = rt_stop,
	.pointer = rt_pointer,
	.transfer = rt_transfer,
	.close = rt_close,
	.hw_params = rt_hw_params,
	.prepare = rt_prepare,
	.resume = rt_resume,
	.poll_revents = rt_poll_revents,
};

/* ---- configuration and open ------------------------------------------ */

/* Access types the card offers (the `access` field). */
enum rt_access { ACCESS_BOTH, ACCESS_RW, ACCESS_MMAP };

struct rt_conf {
	const char *control, *playback_file, *capture_file;
	int capture_loop, paced;
	enum rt_access access;
	long period_bytes_max;
	long channels_min, channels_max;
	unsigned int rates[MAX_LIST], n_rates;
	unsigned int formats[MAX_LIST], n_formats;
};

/* Reads a list of integers (rates) or format names into `out`. */
static int conf_list(snd_config_t *n, bool formats, unsigned int *out, unsigned int *count)
{
	snd_config_iterator_t i, next;

	*count = 0;
	snd_config_for_each(i, next, n) {
		snd_config_t *e = snd_config_iterator_entry(i);
		long v;
		const char *s;

		if (*count == MAX_LIST)
			return -EINVAL;
		if (formats) {
			if (snd_config_get_string(e, &s) < 0)
				return -EINVAL;
			v = snd_pcm_format_value(s);
			if (v == SND_PCM_FORMAT_UNKNOWN) {
				SNDERR("resoundtest: unknown format %s", s);
				return -EINVAL;
			}
		} else if (snd_config_get_integer(e, &v) < 0 || v <= 0) {
			return -EINVAL;
		}
		out[(*count)++] = (unsigned int)v;
	}
	return 0;
}

/* Reads the `access` field: "rw", "mmap" or "both". */
static int conf_access(snd_config_t *n, enum rt_access *out)
{
	const char *s;

	if (snd_config_get_string(n, &s) < 0)
		return -EINVAL;
	if (!strcmp(s, "both"))
		*out = ACCESS_BOTH;
	else if (!strcmp(s, "rw"))
		*out = ACCESS_RW;
	else if (!strcmp(s, "mmap"))
		*out = ACCESS_MMAP;
	else {
		SNDERR("resoundtest: access must be rw, mmap or both, not %s", s);
		return -EINVAL;
	}
	return 0;
}

/* Reads one field of the PCM's block; -EINVAL for unknown or bad ones. */
static int conf_field(snd_config_t *n, const char *id, struct rt_conf *c)
{
	if (!strcmp(id, "comment") || !strcmp(id, "type") || !strcmp(id, "hint"))
		return 0;
	if (!strcmp(id, "control"))
		return snd_config_get_string(n, &c->control);
	if (!strcmp(id, "playback_file"))
		return snd_config_get_string(n, &c->playback_file);
	if (!strcmp(id, "capture_file"))
		return snd_config_get_string(n, &c->capture_file);
	if (!strcmp(id, "capture_loop"))
		return (c->capture_loop = snd_config_get_bool(n)) < 0 ? -EINVAL : 0;
	if (!strcmp(id, "paced"))
		return (c->paced = snd_config_get_bool(n)) < 0 ? -EINVAL : 0;
	if (!strcmp(id, "access"))
		return conf_access(n, &c->access);
	if (!strcmp(id, "period_bytes_max"))
		return snd_config_get_integer(n, &c->period_bytes_max);
	if (!strcmp(id, "channels_min"))
		return snd_config_get_integer(n, &c->channels_min);
	if (!strcmp(id, "channels_max"))
		return snd_config_get_integer(n, &c->channels_max);
	if (!strcmp(id, "rates"))
		return conf_list(n, false, c->rates, &c->n_rates);
	if (!strcmp(id, "formats"))
		return conf_list(n, true, c->formats, &c->n_formats);
	SNDERR("resoundtest: unknown field %s", id);
	return -EINVAL;
}

static int parse_conf(snd_config_t *conf, struct rt_conf *c)
{
	snd_config_iterator_t i, next;
	static const unsigned int all_formats[] = {
		SND_PCM_FORMAT_FLOAT_LE, SND_PCM_FORMAT_S32_LE, SND_PCM_FORMAT_S24_3LE,
		SND_PCM_FORMAT_S24_LE, SND_PCM_FORMAT_S16_LE,
	};

	memset(c, 0, sizeof(*c));
	c->paced = 1;
	c->channels_min = 1;
	c->channels_max = MAX_LIST;
	c->period_bytes_max = 1 << 20;
	snd_config_for_each(i, next, conf) {
		snd_config_t *n = snd_config_iterator_entry(i);
		const char *id;

		if (snd_config_get_id(n, &id) < 0)
			continue;
		if (conf_field(n, id, c) < 0) {
			SNDERR("resoundtest: bad value for %s", id);
			return -EINVAL;
		}
	}
	if (c->period_bytes_max < 64 || c->period_bytes_max > (1 << 20)) {
		SNDERR("resoundtest: period_bytes_max must be within 64..%d", 1 << 20);
		return -EINVAL;
	}
	if (c->channels_min < 1 || c->channels_max > MAX_LIST || c->channels_min > c->channels_max) {
		SNDERR("resoundtest: channels must be within 1..%d", MAX_LIST);
		return -EINVAL;
	}
	if (c->n_formats == 0) {
		memcpy(c->formats, all_formats, sizeof(all_formats));
		c->n_formats = sizeof(all_formats) / sizeof(all_formats[0]);
	}
	return 0;
}

static int set_constraints(rt_t *rt, const struct rt_conf *c)
{
	static const unsigned int access[] = {
		SND_PCM_ACCESS_RW_INTERLEAVED, SND_PCM_ACCESS_RW_NONINTERLEAVED,
		SND_PCM_ACCESS_MMAP_INTERLEAVED, SND_PCM_ACCESS_MMAP_NONINTERLEAVED,
	};
	/* rw: the first two; mmap: the last two; both: all four. */
	const unsigned int *offered = c->access == ACCESS_MMAP ? access + 2 : access;
	unsigned int n_offered = c->access == ACCESS_BOTH ? 4 : 2;
	snd_pcm_ioplug_t *io = &rt->io;
	int err;

	if ((err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_ACCESS, n_offered,
						 offered)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_FORMAT, c->n_formats,
						 c->formats)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_CHANNELS,
						   (unsigned int)c->channels_min,
						   (unsigned int)c->channels_max)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIOD_BYTES, 64,
						   (unsigned int)c->period_bytes_max)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_BUFFER_BYTES, 128,
						   16 << 20)) < 0 ||
	    (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIODS, 2, 1024)) < 0)
		return err;
	if (c->n_rates > 0)
		return snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_RATE, c->n_rates,
						     c->rates);
	return snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_RATE, 8000, 192000);
}

/* Opens the data file of the stream and the timer; fills `rt`. */
static int open_resources(rt_t *rt, const struct rt_conf *c, snd_pcm_stream_t stream)
{
	rt->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (rt->timer_fd < 0)
		return -errno;
	if (stream == SND_PCM_STREAM_PLAYBACK && c->playback_file) {
		rt->play_fd = open(c->playback_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (rt->play_fd < 0) {
			SNDERR("resoundtest: cannot create %s: %s", c->playback_file, strerror(errno));
			return -errno;
		}
	}
	if (stream == SND_PCM_STREAM_CAPTURE && c->capture_file) {
		rt->cap_fd = open(c->capture_file, O_RDONLY | O_CLOEXEC);
		if (rt->cap_fd < 0) {
			SNDERR("resoundtest: cannot open %s: %s", c->capture_file, strerror(errno));
			return -errno;
		}
		rt->cap_size = lseek(rt->cap_fd, 0, SEEK_END);
		lseek(rt->cap_fd, 0, SEEK_SET);
	}
	if (c->control && !(rt->control = strdup(c->control)))
		return -ENOMEM;
	return 0;
}

SND_PCM_PLUGIN_DEFINE_FUNC(resoundtest)
{
	struct rt_conf c;
	rt_t *rt;
	int err;

	(void)root;
	err = parse_conf(conf, &c);
	if (err < 0)
		return err;
	if (control_says_vanished(c.control))
		return -ENODEV;
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	rt->timer_fd = rt->play_fd = rt->cap_fd = -1;
	rt->capture_loop = c.capture_loop;
	rt->paced = c.paced;
	rt->boundary = 1;
	err = open_resources(rt, &c, stream);
	if (err < 0) {
		rt_close(&rt->io);
		return err;
	}
	if (rt->control) {
		char word[32];
		read_control(rt->control, word, sizeof(word), &rt->seen); /* old requests are done */
	}
	rt->io.version = SND_PCM_IOPLUG_VERSION;
	rt->io.name = "resound test sound card";
	rt->io.flags = SND_PCM_IOPLUG_FLAG_BOUNDARY_WA | SND_PCM_IOPLUG_FLAG_MONOTONIC;
	rt->io.poll_fd = rt->timer_fd;
	rt->io.poll_events = POLLIN; /* the timerfd is readable at a period boundary */
	rt->io.mmap_rw = 0;
	rt->io.callback = &rt_callback;
	rt->io.private_data = rt;
	err = snd_pcm_ioplug_create(&rt->io, name, stream, mode);
	if (err < 0) {
		rt_close(&rt->io);
		return err;
	}
	err = set_constraints(rt, &c);
	if (err < 0) {
		snd_pcm_ioplug_delete(&rt->io);
		return err;
	}
	*pcmp = rt->io.pcm;
	return 0;
}

SND_PCM_PLUGIN_SYMBOL(resoundtest);
