/*
 * ABI check: the layout of every public JACK struct and the value of every
 * enum constant, as the distribution's headers define them, compared with
 * what resound's libjack.so.0 uses (resound_libjack_abi()). Also checks the
 * exported data symbols. Prints "OK n" or "MISMATCH ..." lines; exits 1 on
 * any mismatch.
 */
#include <dlfcn.h>
#include <jack/jack.h>
#include <jack/metadata.h>
#include <jack/midiport.h>
#include <jack/ringbuffer.h>
#include <jack/session.h>
#include <jack/transport.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char expected[16384];
static size_t used;

#define LINE(...) (used += (size_t)snprintf(expected + used, sizeof expected - used, __VA_ARGS__))
#define SIZE(t) LINE("%s %zu\n", #t, sizeof(t))
#define OFF(t, f) LINE("%s.%s %zu\n", #t, #f, offsetof(t, f))
#define CONST(n) LINE("%s %lld\n", #n, (long long)(n))

int main(void) {
    SIZE(jack_position_t);
    OFF(jack_position_t, unique_1); OFF(jack_position_t, usecs); OFF(jack_position_t, frame_rate);
    OFF(jack_position_t, frame); OFF(jack_position_t, valid); OFF(jack_position_t, bar);
    OFF(jack_position_t, beat); OFF(jack_position_t, tick); OFF(jack_position_t, bar_start_tick);
    OFF(jack_position_t, beats_per_bar); OFF(jack_position_t, beat_type);
    OFF(jack_position_t, ticks_per_beat); OFF(jack_position_t, beats_per_minute);
    OFF(jack_position_t, frame_time); OFF(jack_position_t, next_time);
    OFF(jack_position_t, bbt_offset); OFF(jack_position_t, audio_frames_per_video_frame);
    OFF(jack_position_t, video_offset); OFF(jack_position_t, tick_double);
    OFF(jack_position_t, padding); OFF(jack_position_t, unique_2);
    SIZE(jack_transport_info_t);
    OFF(jack_transport_info_t, frame_rate); OFF(jack_transport_info_t, usecs);
    OFF(jack_transport_info_t, valid); OFF(jack_transport_info_t, transport_state);
    OFF(jack_transport_info_t, frame); OFF(jack_transport_info_t, loop_start);
    OFF(jack_transport_info_t, loop_end); OFF(jack_transport_info_t, smpte_offset);
    OFF(jack_transport_info_t, smpte_frame_rate); OFF(jack_transport_info_t, bar);
    OFF(jack_transport_info_t, beat); OFF(jack_transport_info_t, tick);
    OFF(jack_transport_info_t, bar_start_tick); OFF(jack_transport_info_t, beats_per_bar);
    OFF(jack_transport_info_t, beat_type); OFF(jack_transport_info_t, ticks_per_beat);
    OFF(jack_transport_info_t, beats_per_minute);
    SIZE(jack_latency_range_t);
    OFF(jack_latency_range_t, min); OFF(jack_latency_range_t, max);
    SIZE(jack_midi_event_t);
    OFF(jack_midi_event_t, time); OFF(jack_midi_event_t, size); OFF(jack_midi_event_t, buffer);
    SIZE(jack_ringbuffer_data_t);
    OFF(jack_ringbuffer_data_t, buf); OFF(jack_ringbuffer_data_t, len);
    SIZE(jack_ringbuffer_t);
    OFF(jack_ringbuffer_t, buf); OFF(jack_ringbuffer_t, write_ptr); OFF(jack_ringbuffer_t, read_ptr);
    OFF(jack_ringbuffer_t, size); OFF(jack_ringbuffer_t, size_mask); OFF(jack_ringbuffer_t, mlocked);
    SIZE(jack_property_t);
    OFF(jack_property_t, key); OFF(jack_property_t, data); OFF(jack_property_t, type);
    SIZE(jack_description_t);
    OFF(jack_description_t, subject); OFF(jack_description_t, property_cnt);
    OFF(jack_description_t, properties); OFF(jack_description_t, property_size);
    SIZE(jack_session_event_t);
    OFF(jack_session_event_t, type); OFF(jack_session_event_t, session_dir);
    OFF(jack_session_event_t, client_uuid); OFF(jack_session_event_t, command_line);
    OFF(jack_session_event_t, flags); OFF(jack_session_event_t, future);
    SIZE(jack_session_command_t);
    OFF(jack_session_command_t, uuid); OFF(jack_session_command_t, client_name);
    OFF(jack_session_command_t, command); OFF(jack_session_command_t, flags);
    CONST(JackNullOption); CONST(JackNoStartServer); CONST(JackUseExactName);
    CONST(JackServerName); CONST(JackLoadName); CONST(JackLoadInit); CONST(JackSessionID);
    CONST(JackOpenOptions); CONST(JackLoadOptions);
    CONST(JackFailure); CONST(JackInvalidOption); CONST(JackNameNotUnique);
    CONST(JackServerStarted); CONST(JackServerFailed); CONST(JackServerError);
    CONST(JackNoSuchClient); CONST(JackLoadFailure); CONST(JackInitFailure);
    CONST(JackShmFailure); CONST(JackVersionError); CONST(JackBackendError);
    CONST(JackClientZombie);
    CONST(JackPortIsInput); CONST(JackPortIsOutput); CONST(JackPortIsPhysical);
    CONST(JackPortCanMonitor); CONST(JackPortIsTerminal);
    CONST(JackTransportStopped); CONST(JackTransportRolling); CONST(JackTransportStarting);
    CONST(JackPositionBBT); CONST(JackPositionTimecode); CONST(JackBBTFrameOffset);
    CONST(JackAudioVideoRatio); CONST(JackVideoFrameOffset); CONST(JackTickDouble);
    CONST(JACK_POSITION_MASK);
    CONST(JackCaptureLatency); CONST(JackPlaybackLatency);
    CONST(PropertyCreated); CONST(PropertyChanged); CONST(PropertyDeleted);
    /* The sizes the headers document (JACK_CLIENT_NAME_SIZE 64, port names 320, types 32). */
    LINE("jack_client_name_size %d\n", 64);
    LINE("jack_port_name_size %d\n", 320);
    LINE("jack_port_type_size %d\n", 32);

    const char *(*abi)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "resound_libjack_abi");
    if (!abi) {
        printf("NOT-RESOUND: the libjack.so.0 loaded is not resound's (no resound_libjack_abi)\n");
        return 2;
    }
    int bad = 0, n = 0;
    /* Every expected line must appear in the library's report. */
    const char *ours = abi();
    char *save = NULL;
    char *copy = strdup(expected);
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        n++;
        char key[128];
        long long want;
        if (sscanf(line, "%127s %lld", key, &want) != 2)
            continue;
        /* find "key " at a line start in ours */
        const char *p = ours;
        long long got = -1;
        size_t kl = strlen(key);
        int found = 0;
        while (p && *p) {
            if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
                got = atoll(p + kl + 1);
                found = 1;
                break;
            }
            p = strchr(p, '\n');
            if (p)
                p++;
        }
        if (!found || got != want) {
            printf("MISMATCH %s: headers %lld, resound %s%lld\n", key, want, found ? "" : "(missing) ",
                   got);
            bad++;
        }
    }
    free(copy);
    /* Functions that report sizes must agree with the headers too. */
    if (jack_client_name_size() != 64 || jack_port_name_size() != 320 || jack_port_type_size() != 32) {
        printf("MISMATCH name sizes: %d %d %d\n", jack_client_name_size(), jack_port_name_size(),
               jack_port_type_size());
        bad++;
    }
    /* Exported data symbols. */
    struct {
        const char *got, *want;
    } md[] = {
        {JACK_METADATA_CONNECTED, "http://jackaudio.org/metadata/connected"},
        {JACK_METADATA_EVENT_TYPES, "http://jackaudio.org/metadata/event-types"},
        {JACK_METADATA_HARDWARE, "http://jackaudio.org/metadata/hardware"},
        {JACK_METADATA_ICON_LARGE, "http://jackaudio.org/metadata/icon-large"},
        {JACK_METADATA_ICON_NAME, "http://jackaudio.org/metadata/icon-name"},
        {JACK_METADATA_ICON_SMALL, "http://jackaudio.org/metadata/icon-small"},
        {JACK_METADATA_ORDER, "http://jackaudio.org/metadata/order"},
        {JACK_METADATA_PRETTY_NAME, "http://jackaudio.org/metadata/pretty-name"},
        {JACK_METADATA_PORT_GROUP, "http://jackaudio.org/metadata/port-group"},
        {JACK_METADATA_SIGNAL_TYPE, "http://jackaudio.org/metadata/signal-type"},
    };
    for (size_t i = 0; i < sizeof md / sizeof md[0]; i++) {
        n++;
        if (!md[i].got || strcmp(md[i].got, md[i].want) != 0) {
            printf("MISMATCH metadata key %zu: %s\n", i, md[i].got ? md[i].got : "(null)");
            bad++;
        }
    }
    if (jack_error_callback == NULL || jack_info_callback == NULL) {
        printf("MISMATCH default error/info callbacks are NULL\n");
        bad++;
    }
    if (bad)
        return 1;
    printf("OK %d\n", n);
    return 0;
}
