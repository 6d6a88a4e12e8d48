/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

#include <json-glib/json-glib.h>

#include "hr-api.h"
#include "hr-daemon.h"

G_BEGIN_DECLS

#define MiB(x) ((guint64)(x) << 20)
#define TIMEOUT_US (10 * G_USEC_PER_SEC)

typedef struct {
	gchar *tmpdir;
	HrConfig *config;
	HrDaemon *daemon;
} Fixture;

/*
 * A child process standing for a QEMU process other than this test
 * program: it connects to the VM socket when asked, so that the daemon
 * sees its pid (SO_PEERCRED), and hands the connection over. It lives
 * until fake_qemu_exit() or the test's end.
 */
typedef struct {
	gint pid;
	gint control; /* socketpair end: a byte asks for a connection, EOF ends it */
} FakeQemu;

FakeQemu *
fake_qemu_new(void);
/* the process exits (SIGKILL) and is reaped; its connections stay open until freed */
void
fake_qemu_exit(FakeQemu *qemu);
void
fake_qemu_free(FakeQemu *qemu);

typedef struct {
	GSocket *socket;
	HrFrameReader *reader;
	gboolean eof;
	GArray *pcp; /* guint32 policies of the SET_PCPs answered on the side */
	FakeQemu *qemu; /* the process that connected, or NULL: this test program */
} FakeDevice;

typedef gboolean (*CondFunc)(gpointer data);

/* a temporary directory and a config whose sockets and state_dir are in it */
void
fixture_config(Fixture *f, const gchar *tmpl);
/* start the daemon on f->config */
void
fixture_start(Fixture *f);
/* fixture_config() and fixture_start() */
void
fixture_setup(Fixture *f, gconstpointer data);
/* rm -rf the temporary directory */
void
fixture_remove_tmpdir(Fixture *f);
void
fixture_teardown(Fixture *f, gconstpointer data);
/* run the main loop until @cond holds; fail the test after 10 s */
void
wait_for(CondFunc cond, gpointer data, const gchar *what);

FakeDevice *
fake_connect(Fixture *f);
void
fake_free(FakeDevice *dev);
void
fake_send_raw(FakeDevice *dev, const guint8 *data, gsize len);
void
fake_send(FakeDevice *dev, guint16 type, GBytes *payload);
void
fake_send_state(FakeDevice *dev, const HrChanDeviceState *state);
/* read what the daemon sent; TRUE once a frame or EOF arrived */
gboolean
fake_poll(FakeDevice *dev, HrChanFrame **frame);
HrChanFrame *
fake_recv(FakeDevice *dev);
HrCmd *
fake_expect_cmd(FakeDevice *dev, guint16 type);
void
fake_expect_silence(FakeDevice *dev, guint ms);
/* the daemon closed the connection */
void
fake_wait_eof(FakeDevice *dev);
/* HELLO, expect WELCOME, end the (empty) resync with a DEVICE_STATE */
FakeDevice *
fake_device_up(Fixture *f, const gchar *name, guint8 uuid_seed);
FakeDevice *
fake_device_up_hello(Fixture *f, const HrChanHello *hello);
/* a connection made by @qemu (NULL: this program) */
FakeDevice *
fake_connect_from(Fixture *f, FakeQemu *qemu);
/* connect as @name, resync @n held blocks from @first, end it with a DEVICE_STATE */
FakeDevice *
fake_device_resync(Fixture *f, const gchar *name, guint8 uuid_seed, guint64 first, guint n);
/* the same from @qemu's process */
FakeDevice *
fake_device_resync_from(Fixture *f, FakeQemu *qemu, const gchar *name, guint8 uuid_seed,
			guint64 first, guint n);

/* @uuid_seed 0: the all-zero UUID */
HrChanHello *
make_hello(const gchar *name, guint8 uuid_seed);
GBytes *
make_status(guint64 seq, guint64 request_id, guint64 first_gpa);
GBytes *
make_result(guint16 type, guint64 request_id, guint32 status, guint32 tried, guint32 freed,
	    guint64 pages);
GBytes *
make_blocks(guint16 type, guint64 request_id, guint32 reason, guint64 first, guint n);
/* the first guest, or NULL */
HrGuest *
first_guest(Fixture *f);
/* the one guest; fails the test unless exactly one is known */
HrGuest *
only_guest(Fixture *f);

/* the client runs on the daemon's own main loop, so it is async inside */
JsonNode *
http(Fixture *f, const gchar *method, const gchar *path, guint expect_status, gchar **text);
JsonNode *
http_body(Fixture *f, const gchar *method, const gchar *path, const gchar *body,
	  guint expect_status, gchar **text);
/* the same in two halves, for a test that acts while the daemon has not answered */
typedef struct _HttpCall HttpCall;
HttpCall *
http_start(Fixture *f, const gchar *method, const gchar *path, const gchar *body);
gboolean
http_done(HttpCall *call);
/* waits for the answer and frees @call */
JsonNode *
http_finish(HttpCall *call, guint expect_status, gchar **text);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(FakeDevice, fake_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FakeQemu, fake_qemu_free)

G_END_DECLS
