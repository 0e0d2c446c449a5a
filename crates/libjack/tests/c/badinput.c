/*
 * Bad input: JACK's return codes and status bits, a message through the
 * error callback, and never a crash.
 *
 * Usage: badinput SERVER
 * Phase 1 prints "CHECK <what> ok" or "CHECK <what> FAIL <detail>" for each
 * check, then "PHASE2". Phase 2 keeps calling into the library from two
 * threads until the test harness has stopped the server, then checks that
 * everything fails cleanly, and prints "SURVIVED errors=<n>".
 */
#include <jack/intclient.h>
#include <jack/jack.h>
#include <jack/metadata.h>
#include <jack/midiport.h>
#include <jack/ringbuffer.h>
#include <jack/statistics.h>
#include <jack/thread.h>
#include <jack/transport.h>
#include <jack/uuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

static atomic_int errors, infos, shut, failed;
static const char *server;

static void count_error(const char *msg) {
    (void)msg;
    atomic_fetch_add(&errors, 1);
}

static void count_info(const char *msg) {
    (void)msg;
    atomic_fetch_add(&infos, 1);
}

static void check(const char *what, int ok, const char *fmt, long v) {
    if (ok) {
        printf("CHECK %s ok\n", what);
    } else {
        printf("CHECK %s FAIL ", what);
        printf(fmt, v);
        printf("\n");
        atomic_fetch_add(&failed, 1);
    }
}

/* The call must fail AND report through the error callback. */
#define EXPECT_ERR(what, cond)                                                                   \
    do {                                                                                         \
        int e0 = atomic_load(&errors);                                                           \
        int ok_ = (cond);                                                                        \
        check(what, ok_ && atomic_load(&errors) > e0, "(result ok=%ld, or no error message)",  \
              (long)ok_);                                                                        \
    } while (0)

static jack_client_t *open_c(const char *name, jack_options_t o, jack_status_t *st) {
    return jack_client_open(name, o | JackServerName | JackNoStartServer, st, server);
}

static void info_shutdown(jack_status_t code, const char *reason, void *arg) {
    (void)arg;
    printf("SHUTDOWN 0x%x %s\n", (unsigned)code, reason);
    atomic_store(&shut, 1);
}

static int process(jack_nframes_t n, void *arg) {
    jack_port_t *p = arg;
    float *b = jack_port_get_buffer(p, n);
    if (b)
        memset(b, 0, n * sizeof(float));
    return 0;
}

static void tb(jack_transport_state_t s, jack_nframes_t n, jack_position_t *p, int np, void *arg) {
    (void)s, (void)n, (void)p, (void)np, (void)arg;
}

static jack_client_t *victim;
static atomic_int stop_hammer;

static void *hammer(void *arg) {
    (void)arg;
    char name[64];
    int i = 0;
    while (!atomic_load(&stop_hammer)) {
        snprintf(name, sizeof name, "p%d", i++ % 4);
        jack_port_t *p = jack_port_register(victim, name, JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
        const char **ports = jack_get_ports(victim, NULL, NULL, 0);
        if (ports)
            jack_free(ports);
        jack_connect(victim, "system:capture_1", "system:playback_1");
        jack_position_t pos;
        jack_transport_query(victim, &pos);
        if (p)
            jack_port_unregister(victim, p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    server = argc > 1 ? argv[1] : "default";
    /* Assigned directly, as some programs do (a copy-relocated data symbol). */
    jack_error_callback = count_error;
    jack_set_info_function(count_info);
    jack_status_t st = 0;

    /* --- opening --- */
    jack_client_t *c = jack_client_open("x", JackNoStartServer | JackServerName, &st, "no-such-server");
    check("open: no server -> NULL, JackFailure|JackServerFailed",
          c == NULL && (st & JackFailure) && (st & JackServerFailed), "status 0x%lx", (long)st);
    EXPECT_ERR("open: invalid option", (c = jack_client_open("x", (jack_options_t)0x4000, &st)) == NULL &&
                                           st == (JackFailure | JackInvalidOption));
    EXPECT_ERR("open: NULL name", open_c(NULL, 0, &st) == NULL && (st & JackFailure));
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    EXPECT_ERR("open: over-long name", open_c(longname, 0, &st) == NULL && (st & JackFailure));
    jack_client_t *a = open_c("bad", JackUseExactName, &st);
    check("open: server by name (variadic argument)", a != NULL && st == 0, "status 0x%lx", (long)st);
    if (!a)
        return 1;
    EXPECT_ERR("open: exact name taken -> JackNameNotUnique",
               open_c("bad", JackUseExactName, &st) == NULL && (st & JackFailure) && (st & JackNameNotUnique));
    jack_client_t *b = open_c("bad", 0, &st);
    check("open: taken name renamed, JackNameNotUnique set",
          b && (st & JackNameNotUnique) && !(st & JackFailure) && strcmp(jack_get_client_name(b), "bad") != 0,
          "status 0x%lx", (long)st);
    jack_client_open("x", JackNullOption, NULL); /* NULL status pointer must be fine */

    /* --- NULL pointers --- */
    EXPECT_ERR("activate(NULL)", jack_activate(NULL) != 0);
    EXPECT_ERR("client_close(NULL)", jack_client_close(NULL) != 0);
    EXPECT_ERR("get_client_name(NULL)", jack_get_client_name(NULL) == NULL);
    EXPECT_ERR("port_register(NULL client)",
               jack_port_register(NULL, "p", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0) == NULL);
    EXPECT_ERR("port_register(NULL name)",
               jack_port_register(a, NULL, JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0) == NULL);
    EXPECT_ERR("port_register(NULL type)", jack_port_register(a, "p", NULL, JackPortIsInput, 0) == NULL);
    EXPECT_ERR("port_get_buffer(NULL)", jack_port_get_buffer(NULL, 64) == NULL);
    EXPECT_ERR("port_name(NULL)", jack_port_name(NULL) == NULL);
    EXPECT_ERR("port_flags(NULL)", jack_port_flags(NULL) == 0);
    EXPECT_ERR("connect(NULL name)", jack_connect(a, NULL, "system:playback_1") != 0);
    EXPECT_ERR("set_process_callback(NULL client)", jack_set_process_callback(NULL, process, NULL) != 0);
    EXPECT_ERR("transport_reposition(NULL pos)", jack_transport_reposition(a, NULL) != 0);
    EXPECT_ERR("port_get_aliases(NULL array)",
               jack_port_get_aliases(jack_port_by_name(a, "system:capture_1"), NULL) < 0);
    check("midi functions with NULL buffers",
          jack_midi_get_event_count(NULL) == 0 && jack_midi_event_write(NULL, 0, NULL, 0) != 0 &&
              jack_midi_event_reserve(NULL, 0, 3) == NULL && jack_midi_max_event_size(NULL) == 0,
          "%ld", 0);
    jack_midi_clear_buffer(NULL);
    jack_ringbuffer_free(NULL);
    check("ringbuffer functions with NULL", jack_ringbuffer_read_space(NULL) == 0 &&
                                                jack_ringbuffer_write(NULL, "x", 1) == 0,
          "%ld", 0);
    jack_uuid_t u;
    check("uuid_parse(garbage / no type bits / NULL)",
          jack_uuid_parse("garbage", &u) != 0 && jack_uuid_parse("5", &u) != 0 && jack_uuid_parse(NULL, &u) != 0,
          "%ld", 0);
    check("get_property(NULL key)", jack_get_property(1, NULL, NULL, NULL) != 0, "%ld", 0);
    jack_free(NULL);

    /* --- unknown ports and invalid names --- */
    check("port_by_name(unknown) -> NULL", jack_port_by_name(a, "no:such") == NULL, "%ld", 0);
    check("port_by_id(unknown) -> NULL", jack_port_by_id(a, 9999) == NULL, "%ld", 0);
    EXPECT_ERR("connect(unknown ports)", jack_connect(a, "no:such", "nor:this") != 0);
    EXPECT_ERR("disconnect(not connected)",
               jack_disconnect(a, "system:capture_1", "system:playback_1") != 0);
    EXPECT_ERR("connect(output to output)", jack_connect(a, "system:capture_1", "system:capture_2") != 0);
    EXPECT_ERR("get_ports(invalid regex) -> NULL", jack_get_ports(a, "([", NULL, 0) == NULL);
    EXPECT_ERR("port_register(unknown type)", jack_port_register(a, "p", "17 bit turnips", JackPortIsInput, 0) == NULL);
    EXPECT_ERR("port_register(input and output)",
               jack_port_register(a, "p", JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput | JackPortIsOutput, 0) == NULL);
    char longport[400];
    memset(longport, 'p', sizeof longport - 1);
    longport[sizeof longport - 1] = 0;
    EXPECT_ERR("port_register(over-long name)",
               jack_port_register(a, longport, JACK_DEFAULT_AUDIO_TYPE, JackPortIsInput, 0) == NULL);
    jack_port_t *pa = jack_port_register(a, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0);
    EXPECT_ERR("port_register(duplicate name)",
               jack_port_register(a, "out", JACK_DEFAULT_AUDIO_TYPE, JackPortIsOutput, 0) == NULL);
    EXPECT_ERR("port_unregister(someone else's port)",
               jack_port_unregister(b, pa) != 0);
    EXPECT_ERR("set_buffer_size(7)", jack_set_buffer_size(a, 7) != 0);
    check("connect twice -> EEXIST",
          jack_connect(a, "bad:out", "system:playback_1") == 0 &&
              jack_connect(a, "bad:out", "system:playback_1") == EEXIST,
          "%ld", 0);
    jack_position_t pos;
    memset(&pos, 0, sizeof pos);
    pos.valid = JackVideoFrameOffset;
    check("transport_reposition(invalid bits) -> EINVAL", jack_transport_reposition(a, &pos) == EINVAL, "%ld", 0);
    check("timebase: a conditional master, then another conditional request -> EBUSY",
          jack_set_timebase_callback(a, 1, tb, NULL) == 0 && jack_set_timebase_callback(b, 1, tb, NULL) == EBUSY &&
              jack_release_timebase(b) != 0 && jack_release_timebase(a) == 0,
          "%ld", 0);

    /* --- internal clients --- */
    check("internal_client_handle(unknown) -> JackNoSuchClient",
          jack_internal_client_handle(a, "nosuch", &st) == 0 && (st & JackFailure) && (st & JackNoSuchClient),
          "status 0x%lx", (long)st);
    check("get_internal_client_name(unknown) -> NULL", jack_get_internal_client_name(a, 12345) == NULL, "%ld", 0);
    EXPECT_ERR("internal_client_unload(unknown)", jack_internal_client_unload(a, 12345) != 0);
    EXPECT_ERR("internal_client_load(unknown built-in) -> JackLoadFailure",
               jack_internal_client_load(a, "nosuch", JackNullOption, &st) == 0 && (st & JackLoadFailure));
    EXPECT_ERR("internal_client_load(invalid option)",
               jack_internal_client_load(a, "x", (jack_options_t)0x4000, &st) == 0 && (st & JackInvalidOption));

    /* --- activation state --- */
    jack_set_process_callback(a, process, pa);
    jack_on_info_shutdown(a, info_shutdown, NULL);
    check("activate", jack_activate(a) == 0, "%ld", 0);
    check("activate again is fine", jack_activate(a) == 0, "%ld", 0);
    EXPECT_ERR("set callback while active", jack_set_xrun_callback(a, NULL, NULL) != 0);
    EXPECT_ERR("cycle_wait off the process thread", jack_cycle_wait(a) == 0);
    check("deactivate", jack_deactivate(a) == 0, "%ld", 0);
    check("deactivate again is fine", jack_deactivate(a) == 0, "%ld", 0);
    check("calls on a deactivated client", jack_port_name(pa) != NULL && jack_get_buffer_size(a) > 0 &&
                                               jack_port_get_buffer(pa, 64) != NULL,
          "%ld", 0);
    check("reactivate", jack_activate(a) == 0, "%ld", 0);
    check("close the renamed client", jack_client_close(b) == 0, "%ld", 0);

    /* --- the server goes away mid-call --- */
    victim = a;
    pthread_t t1, t2;
    pthread_create(&t1, NULL, hammer, NULL);
    pthread_create(&t2, NULL, hammer, NULL);
    printf("PHASE2\n");
    for (int i = 0; i < 3000 && !atomic_load(&shut); i++)
        usleep(10000);
    usleep(300000);
    atomic_store(&stop_hammer, 1);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    check("shutdown callback came", atomic_load(&shut) == 1, "%ld", 0);
    EXPECT_ERR("port_register after the server went", jack_port_register(a, "late", JACK_DEFAULT_AUDIO_TYPE,
                                                                         JackPortIsOutput, 0) == NULL);
    EXPECT_ERR("connect after the server went", jack_connect(a, "bad:out", "system:playback_2") != 0);
    jack_transport_query(a, &pos);
    jack_deactivate(a);
    jack_client_close(a);
    jack_status_t st2;
    check("open after the server went -> JackServerFailed",
          open_c("again", 0, &st2) == NULL && (st2 & JackServerFailed), "status 0x%lx", (long)st2);
    jack_set_error_function(NULL); /* back to the default, must not crash */
    printf("SURVIVED errors=%d failed=%d\n", atomic_load(&errors), atomic_load(&failed));
    return atomic_load(&failed) ? 1 : 0;
}
