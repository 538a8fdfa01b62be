/* test_auth.c — the job secret and the challenge-response of auth.h:
 * a good exchange, wrong secrets on either side, replayed, garbled and
 * reflected messages, truncated and silent peers, bad node names. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "herd/auth.h"

static void make_secret(struct auth_secret *s)
{
	char hex[AUTH_SECRET_HEX_LEN + 1];

	assert_int_equal(auth_secret_new(s, hex, NULL), 0);
}

static void test_secret_hex(void **state)
{
	struct auth_secret s, back;
	char hex[AUTH_SECRET_HEX_LEN + 1], bad[AUTH_SECRET_HEX_LEN + 1];
	struct herd_err err;

	(void)state;
	assert_int_equal(auth_secret_new(&s, hex, NULL), 0);
	assert_int_equal(strlen(hex), AUTH_SECRET_HEX_LEN);
	assert_int_equal(strspn(hex, "0123456789abcdef"), AUTH_SECRET_HEX_LEN);
	assert_int_equal(auth_secret_from_hex(&back, hex, NULL), 0);
	assert_memory_equal(s.key, back.key, AUTH_SECRET_LEN);

	/* Two secrets differ (32 random bytes). */
	assert_int_equal(auth_secret_new(&back, bad, NULL), 0);
	assert_memory_not_equal(s.key, back.key, AUTH_SECRET_LEN);

	herd_err_clear(&err);
	assert_int_equal(auth_secret_from_hex(&back, "abcd", &err), -1);
	assert_non_null(strstr(err.text, "64 hex digits"));
	assert_int_equal(auth_secret_from_hex(&back, NULL, &err), -1);
	memcpy(bad, hex, sizeof(bad));
	bad[10] = 'g';
	herd_err_clear(&err);
	assert_int_equal(auth_secret_from_hex(&back, bad, &err), -1);
	/* The error never quotes the secret. */
	assert_null(strstr(err.text, hex + 11));
	assert_non_null(strstr(err.text, "hex digits only"));
	{
		char longer[AUTH_SECRET_HEX_LEN + 2];

		snprintf(longer, sizeof(longer), "%s0", hex);
		assert_int_equal(auth_secret_from_hex(&back, longer, &err), -1);
	}
}

/* One exchange of the four messages in memory. */
struct exchange {
	unsigned char challenge[AUTH_CHALLENGE_LEN], nonce_c[AUTH_NONCE_LEN];
	unsigned char response[AUTH_RESPONSE_LEN], nonce_a[AUTH_NONCE_LEN];
	unsigned char agent_nonce_c[AUTH_NONCE_LEN];
	unsigned char confirm[AUTH_CONFIRM_LEN];
};

static void test_good_exchange(void **state)
{
	struct auth_secret s;
	struct exchange x;

	(void)state;
	make_secret(&s);
	assert_int_equal(auth_challenge_make(x.challenge, x.nonce_c, NULL), 0);
	assert_memory_equal(x.challenge, "HRDc", 4);
	assert_int_equal(auth_response_make(&s, x.challenge, x.response,
					    x.agent_nonce_c, x.nonce_a, NULL),
			 0);
	assert_memory_equal(x.agent_nonce_c, x.nonce_c, AUTH_NONCE_LEN);
	assert_memory_not_equal(x.nonce_a, x.nonce_c, AUTH_NONCE_LEN);
	assert_int_equal(
	    auth_response_check(&s, x.nonce_c, x.response, x.confirm, NULL), 0);
	assert_memory_equal(x.confirm, "HRDk", 4);
	assert_int_equal(
	    auth_confirm_check(&s, x.agent_nonce_c, x.nonce_a, x.confirm, NULL),
	    0);
}

static void test_wrong_secret(void **state)
{
	struct auth_secret ctl, agent;
	struct exchange x, y;
	struct herd_err err;

	(void)state;
	make_secret(&ctl);
	make_secret(&agent);
	/* An agent with another secret cannot join. */
	assert_int_equal(auth_challenge_make(x.challenge, x.nonce_c, NULL), 0);
	assert_int_equal(auth_response_make(&agent, x.challenge, x.response,
					    x.agent_nonce_c, x.nonce_a, NULL),
			 0);
	herd_err_clear(&err);
	assert_int_equal(
	    auth_response_check(&ctl, x.nonce_c, x.response, x.confirm, &err),
	    -1);
	assert_non_null(strstr(err.text, "wrong secret"));

	/* A controller with another secret cannot pose as herd: its
	 * confirmation fails the agent's check. */
	assert_int_equal(auth_challenge_make(y.challenge, y.nonce_c, NULL), 0);
	assert_int_equal(auth_response_make(&agent, y.challenge, y.response,
					    y.agent_nonce_c, y.nonce_a, NULL),
			 0);
	assert_int_equal(
	    auth_response_check(&agent, y.nonce_c, y.response, y.confirm, NULL),
	    0);
	herd_err_clear(&err);
	assert_int_equal(auth_confirm_check(&ctl, y.agent_nonce_c, y.nonce_a,
					    y.confirm, &err),
			 -1);
	assert_non_null(strstr(err.text, "wrong secret"));
}

static void test_replay_and_reflection(void **state)
{
	struct auth_secret s;
	struct exchange old, now;
	unsigned char fake[AUTH_CONFIRM_LEN];

	(void)state;
	make_secret(&s);
	assert_int_equal(auth_challenge_make(old.challenge, old.nonce_c, NULL),
			 0);
	assert_int_equal(auth_response_make(&s, old.challenge, old.response,
					    old.agent_nonce_c, old.nonce_a,
					    NULL),
			 0);
	assert_int_equal(auth_response_check(&s, old.nonce_c, old.response,
					     old.confirm, NULL),
			 0);

	/* A recorded response does not answer a new challenge. */
	assert_int_equal(auth_challenge_make(now.challenge, now.nonce_c, NULL),
			 0);
	assert_memory_not_equal(now.nonce_c, old.nonce_c, AUTH_NONCE_LEN);
	assert_int_equal(auth_response_check(&s, now.nonce_c, old.response,
					     now.confirm, NULL),
			 -1);

	/* A recorded confirmation does not answer the agent's new nonce. */
	assert_int_equal(auth_response_make(&s, now.challenge, now.response,
					    now.agent_nonce_c, now.nonce_a,
					    NULL),
			 0);
	assert_int_equal(auth_confirm_check(&s, now.agent_nonce_c, now.nonce_a,
					    old.confirm, NULL),
			 -1);

	/* The agent's own MAC, sent back as a confirmation, fails: the
	 * labels differ. */
	memcpy(fake, "HRDk", 4);
	memcpy(fake + 4, now.response + 4 + AUTH_NONCE_LEN, AUTH_MAC_LEN);
	assert_int_equal(
	    auth_confirm_check(&s, now.agent_nonce_c, now.nonce_a, fake, NULL),
	    -1);
}

static void test_garbled(void **state)
{
	struct auth_secret s;
	struct exchange x;
	struct herd_err err;

	(void)state;
	make_secret(&s);
	assert_int_equal(auth_challenge_make(x.challenge, x.nonce_c, NULL), 0);
	assert_int_equal(auth_response_make(&s, x.challenge, x.response,
					    x.agent_nonce_c, x.nonce_a, NULL),
			 0);
	/* Every single flipped bit of the response is caught. */
	for (size_t i = 0; i < AUTH_RESPONSE_LEN; i++) {
		unsigned char bad[AUTH_RESPONSE_LEN];

		memcpy(bad, x.response, sizeof(bad));
		bad[i] ^= (unsigned char)(1u << (i % 8));
		assert_int_equal(
		    auth_response_check(&s, x.nonce_c, bad, x.confirm, NULL),
		    -1);
	}
	assert_int_equal(
	    auth_response_check(&s, x.nonce_c, x.response, x.confirm, NULL), 0);
	for (size_t i = 0; i < AUTH_CONFIRM_LEN; i++) {
		unsigned char bad[AUTH_CONFIRM_LEN];

		memcpy(bad, x.confirm, sizeof(bad));
		bad[i] ^= 0x80;
		assert_int_equal(auth_confirm_check(&s, x.agent_nonce_c,
						    x.nonce_a, bad, NULL),
				 -1);
	}
	/* Not a challenge at all. */
	memcpy(x.challenge, "GET ", 4);
	herd_err_clear(&err);
	assert_int_equal(auth_response_make(&s, x.challenge, x.response,
					    x.agent_nonce_c, x.nonce_a, &err),
			 -1);
	assert_non_null(strstr(err.text, "not a herd challenge"));
}

static void test_names(void **state)
{
	char big[AUTH_NAME_MAX + 2];

	(void)state;
	assert_true(auth_name_ok("node-01.cluster_a", 17));
	assert_false(auth_name_ok("", 0));
	assert_false(auth_name_ok("a b", 3));
	assert_false(auth_name_ok("a/b", 3));
	assert_false(auth_name_ok("a\nb", 3));
	memset(big, 'a', sizeof(big));
	assert_true(auth_name_ok(big, AUTH_NAME_MAX));
	assert_false(auth_name_ok(big, AUTH_NAME_MAX + 1));
}

/* ---- over a socketpair, the peer in a child process ------------------- */

enum peer {
	PEER_AGENT,	/* a real agent with the given secret */
	PEER_TRUNCATED, /* half a response, then hangs up */
	PEER_SILENT,	/* reads the challenge, says nothing */
	PEER_BAD_NAME,	/* authenticates, then sends a bad name */
	PEER_FAKE_CTL,	/* poses as herd without the secret */
};

/* Runs the peer on sv[1] in a child; the caller keeps sv[0]. */
static pid_t start_peer(int sv[2], enum peer kind, const struct auth_secret *s)
{
	pid_t pid = fork();
	int fd = sv[1];

	assert_true(pid >= 0);
	if (pid > 0) {
		close(sv[1]);
		return pid;
	}
	close(sv[0]);
	{
		unsigned char buf[AUTH_RESPONSE_LEN];
		char name[AUTH_NAME_MAX + 1];
		int rc = 0;

		switch (kind) {
		case PEER_AGENT:
			rc = auth_agent_handshake(fd, s, "hx1n1", 2000, NULL);
			break;
		case PEER_TRUNCATED:
			rc = recv(fd, buf, AUTH_CHALLENGE_LEN, MSG_WAITALL) ==
					 AUTH_CHALLENGE_LEN &&
				     send(fd, "HRDa0123456789", 14,
					  MSG_NOSIGNAL) == 14
				 ? 0
				 : -1;
			break;
		case PEER_SILENT:
			rc = recv(fd, buf, AUTH_CHALLENGE_LEN, MSG_WAITALL) ==
				     AUTH_CHALLENGE_LEN
				 ? 0
				 : -1;
			/* Holds the socket open until the parent gives
			 * up and closes its end. */
			while (recv(fd, buf, 1, 0) > 0)
				;
			break;
		case PEER_BAD_NAME: {
			struct exchange x;
			unsigned char msg[9] = {'H', 'R', 'D', 'n', 4,
						'a', ' ', 'b', 'c'};

			rc = recv(fd, x.challenge, AUTH_CHALLENGE_LEN,
				  MSG_WAITALL) == AUTH_CHALLENGE_LEN &&
				     auth_response_make(s, x.challenge,
							x.response,
							x.agent_nonce_c,
							x.nonce_a, NULL) == 0 &&
				     send(fd, x.response, AUTH_RESPONSE_LEN,
					  MSG_NOSIGNAL) == AUTH_RESPONSE_LEN &&
				     recv(fd, x.confirm, AUTH_CONFIRM_LEN,
					  MSG_WAITALL) == AUTH_CONFIRM_LEN &&
				     send(fd, msg, sizeof(msg), MSG_NOSIGNAL) ==
					 sizeof(msg)
				 ? 0
				 : -1;
			break;
		}
		case PEER_FAKE_CTL: {
			struct exchange x;

			memset(x.confirm, 0x5a, sizeof(x.confirm));
			memcpy(x.confirm, "HRDk", 4);
			rc = auth_challenge_make(x.challenge, x.nonce_c,
						 NULL) == 0 &&
				     send(fd, x.challenge, AUTH_CHALLENGE_LEN,
					  MSG_NOSIGNAL) == AUTH_CHALLENGE_LEN &&
				     recv(fd, x.response, AUTH_RESPONSE_LEN,
					  MSG_WAITALL) == AUTH_RESPONSE_LEN &&
				     send(fd, x.confirm, AUTH_CONFIRM_LEN,
					  MSG_NOSIGNAL) == AUTH_CONFIRM_LEN &&
				     recv(fd, name, 1, 0) == 0
				 ? 0
				 : 1;
			break;
		}
		}
		_exit(rc == 0 ? 0 : 1);
	}
}

static int peer_status(pid_t pid)
{
	int status = -1;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_handshake_good(void **state)
{
	struct auth_secret s;
	char name[AUTH_NAME_MAX + 1];
	struct herd_err err;
	int sv[2];
	pid_t pid;

	(void)state;
	make_secret(&s);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = start_peer(sv, PEER_AGENT, &s);
	herd_err_clear(&err);
	assert_int_equal(auth_ctl_handshake(sv[0], &s, 2000, name, &err), 0);
	assert_string_equal(name, "hx1n1");
	assert_int_equal(peer_status(pid), 0);
	close(sv[0]);
}

static void test_handshake_wrong_secret(void **state)
{
	struct auth_secret s, other;
	char name[AUTH_NAME_MAX + 1];
	struct herd_err err;
	int sv[2];
	pid_t pid;

	(void)state;
	make_secret(&s);
	make_secret(&other);
	/* An intruder agent: herd refuses it, and the agent never gets a
	 * confirmation. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = start_peer(sv, PEER_AGENT, &other);
	herd_err_clear(&err);
	assert_int_equal(auth_ctl_handshake(sv[0], &s, 2000, name, &err), -1);
	assert_non_null(strstr(err.text, "wrong secret"));
	assert_string_equal(name, "");
	close(sv[0]);
	assert_int_equal(peer_status(pid), 1);

	/* A fake controller: the agent refuses it before sending its name. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = start_peer(sv, PEER_FAKE_CTL, &other);
	herd_err_clear(&err);
	assert_int_equal(auth_agent_handshake(sv[0], &s, "hx1n2", 2000, &err),
			 -1);
	assert_non_null(strstr(err.text, "controller's proof"));
	close(sv[0]);
	/* ...and the fake controller never learnt a name. */
	assert_int_equal(peer_status(pid), 0);
}

static void test_handshake_truncated_silent_badname(void **state)
{
	struct auth_secret s;
	char name[AUTH_NAME_MAX + 1];
	struct herd_err err;
	int sv[2];
	pid_t pid;

	(void)state;
	make_secret(&s);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = start_peer(sv, PEER_TRUNCATED, &s);
	herd_err_clear(&err);
	assert_int_equal(auth_ctl_handshake(sv[0], &s, 2000, name, &err), -1);
	assert_non_null(strstr(err.text, "hung up in the response"));
	assert_non_null(strstr(err.text, "14 of 68"));
	assert_int_equal(peer_status(pid), 0);
	close(sv[0]);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = start_peer(sv, PEER_SILENT, &s);
	herd_err_clear(&err);
	assert_int_equal(auth_ctl_handshake(sv[0], &s, 200, name, &err), -1);
	assert_non_null(strstr(err.text, "timed out waiting for the response"));
	close(sv[0]);
	assert_int_equal(peer_status(pid), 0);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = start_peer(sv, PEER_BAD_NAME, &s);
	herd_err_clear(&err);
	assert_int_equal(auth_ctl_handshake(sv[0], &s, 2000, name, &err), -1);
	assert_non_null(strstr(err.text, "node name"));
	close(sv[0]);
	assert_int_equal(peer_status(pid), 0);

	/* Garbage instead of a challenge: the agent refuses at once. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(
	    send(sv[1], "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n", 40, 0),
	    40);
	herd_err_clear(&err);
	assert_int_equal(auth_agent_handshake(sv[0], &s, "hx1n2", 2000, &err),
			 -1);
	assert_non_null(strstr(err.text, "not a herd challenge"));
	close(sv[0]);
	close(sv[1]);
}

/* herd's side step by step, as the slurm listener drives it from its
 * loop: the challenge is out after the first call, nothing blocks, input
 * that trickles in byte by byte is assembled, and not one byte past the
 * node name is read (the frames behind it belong to the relay). */
static void test_ctl_steps(void **state)
{
	struct auth_secret s;
	struct auth_ctl h;
	struct exchange x;
	unsigned char name_msg[4 + 1 + 5] = {'H', 'R', 'D', 'n', 5,
					     'h', 'x', '1', 'n', '3'};
	unsigned char rest[8];
	int sv[2];

	(void)state;
	make_secret(&s);
	assert_int_equal(
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	assert_int_equal(auth_ctl_begin(&h, NULL), 0);
	assert_true(auth_ctl_wants_write(&h));
	assert_int_equal(auth_ctl_io(&h, sv[0], &s, NULL), 0);
	assert_false(auth_ctl_wants_write(&h));
	assert_false(auth_ctl_proven(&h));
	assert_string_equal(auth_ctl_waiting_for(&h), "response");
	/* The challenge is there already, before the peer said a word. */
	assert_int_equal(recv(sv[1], x.challenge, AUTH_CHALLENGE_LEN, 0),
			 AUTH_CHALLENGE_LEN);
	assert_int_equal(auth_response_make(&s, x.challenge, x.response,
					    x.agent_nonce_c, x.nonce_a, NULL),
			 0);
	for (size_t i = 0; i < AUTH_RESPONSE_LEN; i++) {
		assert_false(auth_ctl_proven(&h));
		assert_int_equal(send(sv[1], x.response + i, 1, 0), 1);
		assert_int_equal(auth_ctl_io(&h, sv[0], &s, NULL), 0);
	}
	assert_true(auth_ctl_proven(&h));
	assert_string_equal(auth_ctl_waiting_for(&h), "node name");
	assert_int_equal(recv(sv[1], x.confirm, AUTH_CONFIRM_LEN, 0),
			 AUTH_CONFIRM_LEN);
	assert_int_equal(
	    auth_confirm_check(&s, x.agent_nonce_c, x.nonce_a, x.confirm, NULL),
	    0);
	/* The name and the start of the first frame in one write. */
	assert_int_equal(send(sv[1], name_msg, sizeof(name_msg), 0),
			 (ssize_t)sizeof(name_msg));
	assert_int_equal(send(sv[1], "FRAME", 5, 0), 5);
	assert_int_equal(auth_ctl_io(&h, sv[0], &s, NULL), 1);
	assert_string_equal(h.name, "hx1n3");
	assert_int_equal(recv(sv[0], rest, sizeof(rest), 0), 5);
	assert_memory_equal(rest, "FRAME", 5);
	auth_ctl_wipe(&h);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_secret_hex),
	    cmocka_unit_test(test_good_exchange),
	    cmocka_unit_test(test_wrong_secret),
	    cmocka_unit_test(test_replay_and_reflection),
	    cmocka_unit_test(test_garbled),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_handshake_good),
	    cmocka_unit_test(test_handshake_wrong_secret),
	    cmocka_unit_test(test_handshake_truncated_silent_badname),
	    cmocka_unit_test(test_ctl_steps),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
