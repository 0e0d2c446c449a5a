/*
 * Behaviour where resound used to differ from jackd, checked the same way
 * on both servers (the test runs this program against resoundd and against
 * Debian's jackd):
 *  - an empty client name is accepted; a second one is numbered ("-01",
 *    JackNameNotUnique);
 *  - once jack_client_close returns, the closed client is gone by UUID;
 *  - a transport stop and a locate requested in the same cycle both count.
 *
 * Usage: parity
 * Prints "CHECK <what> ok|FAIL ..." lines and "DONE failed=<n>".
 */
#include <jack/jack.h>
#include <jack/transport.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failed;

static void check(const char *what, int ok, const char *detail) {
    if (ok) {
        printf("CHECK %s ok\n", what);
    } else {
        printf("CHECK %s FAIL (%s)\n", what, detail ? detail : "");
        failed++;
    }
}

static void empty_names(void) {
    jack_status_t st = 0;
    jack_client_t *a = jack_client_open("", JackNoStartServer, &st);
    check("empty name accepted", a != NULL, "jack_client_open(\"\") failed");
    if (!a)
        return;
    check("empty name kept", strcmp(jack_get_client_name(a), "") == 0, jack_get_client_name(a));
    jack_client_t *b = jack_client_open("", JackNoStartServer, &st);
    check("second empty name accepted", b != NULL, "failed");
    if (b) {
        check("second empty name numbered", strcmp(jack_get_client_name(b), "-01") == 0,
              jack_get_client_name(b));
        check("second empty name says not unique", (st & JackNameNotUnique) != 0, "status");
        jack_client_close(b);
    }
    jack_client_close(a);
}

static void gone_by_uuid_after_close(void) {
    jack_client_t *a = jack_client_open("parity-a", JackNoStartServer, NULL);
    jack_client_t *b = jack_client_open("parity-b", JackNoStartServer, NULL);
    if (!a || !b) {
        check("open two clients", 0, "failed");
        return;
    }
    char *uuid = jack_get_uuid_for_client_name(a, "parity-b");
    check("uuid of a client", uuid != NULL, "NULL");
    if (!uuid)
        return;
    char *name = jack_get_client_name_by_uuid(a, uuid);
    check("name by uuid while open", name && strcmp(name, "parity-b") == 0, name);
    jack_free(name);
    jack_client_close(b);
    name = jack_get_client_name_by_uuid(a, uuid);
    check("gone by uuid once close returned", name == NULL, name);
    jack_free(name);
    jack_free(uuid);
    jack_client_close(a);
}

static void stop_and_locate_in_one_cycle(void) {
    jack_client_t *c = jack_client_open("parity-transport", JackNoStartServer, NULL);
    if (!c) {
        check("open transport client", 0, "failed");
        return;
    }
    jack_activate(c);
    jack_transport_locate(c, 0);
    jack_transport_start(c);
    usleep(200000);
    jack_position_t pos;
    check("transport rolls", jack_transport_query(c, &pos) == JackTransportRolling, "state");
    jack_transport_stop(c);
    jack_transport_locate(c, 10000);
    usleep(200000);
    jack_transport_state_t s = jack_transport_query(c, &pos);
    char detail[64];
    snprintf(detail, sizeof detail, "state %d frame %u", (int)s, pos.frame);
    check("stop then locate: stopped at the locate", s == JackTransportStopped && pos.frame == 10000,
          detail);
    jack_deactivate(c);
    jack_client_close(c);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    empty_names();
    gone_by_uuid_after_close();
    stop_and_locate_in_one_cycle();
    printf("DONE failed=%d\n", failed);
    return failed != 0;
}
