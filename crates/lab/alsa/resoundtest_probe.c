/*
 * resoundtest_probe: a small alsa-lib application the tests of the test
 * sound card (pcm_resoundtest.c) drive. It opens a PCM with exact hardware
 * parameters (no "near" values: a refused rate is an error, reported with
 * the rates the device offers), plays silence or reads for a number of
 * seconds, and reports every error alsa-lib returns and how it recovered,
 * one JSON object a line on stdout:
 *
 *   {"event":"refused","what":"rate","error":"...","rate_min":N,"rate_max":N}
 *   {"event":"running"}
 *   {"event":"error","code":32,"error":"Broken pipe"}      (code = -errno)
 *   {"event":"recovered","how":"prepare"|"resume"|"reopen"}
 *   {"event":"reopen_failed","code":19}
 *   {"event":"done","frames":N}
 *
 * Usage: resoundtest_probe DEVICE play|capture RATE CHANNELS FORMAT PERIOD
 *        PERIODS SECONDS
 */
#include <alsa/asoundlib.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct opts {
	const char *device;
	snd_pcm_stream_t stream;
	unsigned int rate, channels, periods;
	snd_pcm_format_t format;
	snd_pcm_uframes_t period;
	double seconds;
};

static void event_error(const char *event, int err)
{
	printf("{\"event\":\"%s\",\"code\":%d,\"error\":\"%s\"}\n", event, -err, snd_strerror(err));
}

/* Sets exact hardware parameters; reports which one the device refused. */
static int set_params(snd_pcm_t *pcm, const struct opts *o)
{
	snd_pcm_hw_params_t *hw;
	snd_pcm_uframes_t buffer = o->period * o->periods, period = o->period;
	unsigned int min = 0, max = 0;
	int err;

	snd_pcm_hw_params_alloca(&hw);
	if ((err = snd_pcm_hw_params_any(pcm, hw)) < 0 ||
	    (err = snd_pcm_hw_params_set_access(pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)) < 0 ||
	    (err = snd_pcm_hw_params_set_format(pcm, hw, o->format)) < 0 ||
	    (err = snd_pcm_hw_params_set_channels(pcm, hw, o->channels)) < 0) {
		event_error("refused", err);
		return err;
	}
	if ((err = snd_pcm_hw_params_set_rate(pcm, hw, o->rate, 0)) < 0) {
		snd_pcm_hw_params_get_rate_min(hw, &min, NULL);
		snd_pcm_hw_params_get_rate_max(hw, &max, NULL);
		printf("{\"event\":\"refused\",\"what\":\"rate\",\"code\":%d,\"error\":\"%s\","
		       "\"rate_min\":%u,\"rate_max\":%u}\n",
		       -err, snd_strerror(err), min, max);
		return err;
	}
	if ((err = snd_pcm_hw_params_set_period_size(pcm, hw, period, 0)) < 0 ||
	    (err = snd_pcm_hw_params_set_buffer_size(pcm, hw, buffer)) < 0 ||
	    (err = snd_pcm_hw_params(pcm, hw)) < 0) {
		event_error("refused", err);
		return err;
	}
	return 0;
}

static int open_pcm(snd_pcm_t **pcm, const struct opts *o)
{
	int err = snd_pcm_open(pcm, o->device, o->stream, 0);

	if (err < 0)
		return err;
	err = set_params(*pcm, o);
	if (err < 0)
		snd_pcm_close(*pcm);
	return err;
}

/* Recovers from `err`; returns 0 when the stream can go on. */
static int recover(snd_pcm_t **pcm, const struct opts *o, int err)
{
	event_error("error", err);
	if (err == -EPIPE) {
		err = snd_pcm_prepare(*pcm);
		if (err == 0)
			printf("{\"event\":\"recovered\",\"how\":\"prepare\"}\n");
		return err;
	}
	if (err == -ESTRPIPE) {
		while ((err = snd_pcm_resume(*pcm)) == -EAGAIN)
			usleep(10000);
		if (err < 0)
			err = snd_pcm_prepare(*pcm);
		if (err == 0)
			printf("{\"event\":\"recovered\",\"how\":\"resume\"}\n");
		return err;
	}
	if (err == -ENODEV) {
		snd_pcm_close(*pcm);
		while ((err = open_pcm(pcm, o)) < 0) {
			event_error("reopen_failed", err);
			usleep(100000);
		}
		printf("{\"event\":\"recovered\",\"how\":\"reopen\"}\n");
		return 0;
	}
	return err;
}

static int parse(int argc, char **argv, struct opts *o)
{
	if (argc != 9)
		return -1;
	o->device = argv[1];
	o->stream = strcmp(argv[2], "capture") == 0 ? SND_PCM_STREAM_CAPTURE
						    : SND_PCM_STREAM_PLAYBACK;
	o->rate = (unsigned int)atoi(argv[3]);
	o->channels = (unsigned int)atoi(argv[4]);
	o->format = snd_pcm_format_value(argv[5]);
	o->period = (snd_pcm_uframes_t)atol(argv[6]);
	o->periods = (unsigned int)atoi(argv[7]);
	o->seconds = atof(argv[8]);
	return o->format == SND_PCM_FORMAT_UNKNOWN ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	snd_pcm_t *pcm;
	char *buf;
	unsigned long long done = 0, total;
	int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse(argc, argv, &o) < 0) {
		fprintf(stderr, "usage: %s DEVICE play|capture RATE CHANNELS FORMAT PERIOD "
				"PERIODS SECONDS\n", argv[0]);
		return 64;
	}
	if ((err = open_pcm(&pcm, &o)) < 0) {
		event_error("open_failed", err);
		return 2;
	}
	total = (unsigned long long)(o.seconds * o.rate);
	buf = calloc(o.period, (size_t)snd_pcm_format_physical_width(o.format) / 8 * o.channels);
	snd_pcm_format_set_silence(o.format, buf, (unsigned int)(o.period * o.channels));
	printf("{\"event\":\"running\"}\n");
	while (done < total) {
		snd_pcm_sframes_t n = o.stream == SND_PCM_STREAM_PLAYBACK
					      ? snd_pcm_writei(pcm, buf, o.period)
					      : snd_pcm_readi(pcm, buf, o.period);
		if (n < 0) {
			err = recover(&pcm, &o, (int)n);
			if (err < 0) {
				event_error("failed", err);
				return 1;
			}
			continue;
		}
		done += (unsigned long long)n;
	}
	printf("{\"event\":\"done\",\"frames\":%llu}\n", done);
	snd_pcm_close(pcm);
	free(buf);
	return 0;
}
