/* SPDX-License-Identifier: GPL-2.0-only */

#define G_LOG_DOMAIN "HrApiAuth"

#include "hr-api-auth.h"
#include "hr-safefile.h"

#include <errno.h>
#include <grp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HR_API_TOKEN_MIN 16
#define HR_API_MAX_PEER_GROUPS 1024
/* a token per line: far more than any host has */
#define HR_API_TOKENS_MAX (1024 * 1024)

const gchar *
hr_api_role_to_string(HrApiRole role)
{
	switch (role) {
	case HR_API_ROLE_READ:
		return "read";
	case HR_API_ROLE_ADMIN:
		return "admin";
	default:
		return "none";
	}
}

gboolean
hr_api_group_lookup(const gchar *name, gid_t *gid, GError **error)
{
	struct group *gr;
	guint64 n;

	if (g_ascii_string_to_unsigned(name, 10, 0, G_MAXUINT32 - 1, &n, NULL)) {
		*gid = (gid_t)n;
		return TRUE;
	}
	errno = 0;
	gr = getgrnam(name);
	if (gr == NULL) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "group %s: %s", name,
			    errno != 0 ? g_strerror(errno) : "no such group");
		return FALSE;
	}
	*gid = gr->gr_gid;
	return TRUE;
}

/* the peer's groups at connect time: its gid and supplementary groups */
static gboolean
hr_api_peer_in_group(gint fd, gid_t peer_gid, gid_t gid)
{
	gid_t groups[HR_API_MAX_PEER_GROUPS];
	socklen_t len = sizeof(groups);

	if (gid == (gid_t)-1)
		return FALSE;
	if (peer_gid == gid)
		return TRUE;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) != 0)
		return FALSE;
	for (guint i = 0; i < len / sizeof(gid_t); i++) {
		if (groups[i] == gid)
			return TRUE;
	}
	return FALSE;
}

HrApiRole
hr_api_peer_role(GSocket *socket, gid_t admin_gid, gid_t read_gid, gchar **principal,
		 GError **error)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gint fd = g_socket_get_fd(socket);

	*principal = NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "cannot read peer credentials: %s", g_strerror(errno));
		return HR_API_ROLE_NONE;
	}
	*principal = g_strdup_printf("uid:%u", (guint)cred.uid);
	if (cred.uid == 0 || cred.uid == getuid())
		return HR_API_ROLE_ADMIN;
	if (hr_api_peer_in_group(fd, cred.gid, admin_gid))
		return HR_API_ROLE_ADMIN;
	if (hr_api_peer_in_group(fd, cred.gid, read_gid))
		return HR_API_ROLE_READ;
	g_set_error(error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED,
		    "uid %u may not use this API: only root, uid %u and the members of "
		    "api_group or api_read_group (hugeroomd.conf) may",
		    (guint)cred.uid, (guint)getuid());
	return HR_API_ROLE_NONE;
}

gchar *
hr_api_token_principal(const gchar *token)
{
	g_autofree gchar *sum = g_compute_checksum_for_string(G_CHECKSUM_SHA256, token, -1);
	return g_strdup_printf("token:%.16s", sum);
}

/* ---------------------------------------------------------------------- */
/* Bearer tokens */

struct _HrApiTokens {
	GPtrArray *tokens; /* gchar *, parallel to roles */
	GArray *roles;	   /* HrApiRole */
};

void
hr_api_tokens_free(HrApiTokens *tokens)
{
	if (tokens == NULL)
		return;
	g_ptr_array_unref(tokens->tokens);
	g_array_unref(tokens->roles);
	g_free(tokens);
}

HrApiTokens *
hr_api_tokens_load(const gchar *path, GError **error)
{
	g_autoptr(HrApiTokens) tokens = g_new0(HrApiTokens, 1);
	g_autofree gchar *text = NULL;
	g_auto(GStrv) lines = NULL;

	tokens->tokens = g_ptr_array_new_with_free_func(g_free);
	tokens->roles = g_array_new(FALSE, FALSE, sizeof(HrApiRole));
	/* as OpenSSH's StrictModes: only root or we may have written a token in */
	if (!hr_safefile_get_contents(path, getuid(), HR_SAFEFILE_SECRET, HR_API_TOKENS_MAX, &text,
				      NULL, error)) {
		g_prefix_error(error, "api_tokens: ");
		return NULL;
	}
	lines = g_strsplit(text, "\n", -1);
	for (guint i = 0; lines[i] != NULL; i++) {
		g_auto(GStrv) words = NULL;
		HrApiRole role;
		gchar *line = g_strstrip(lines[i]);

		if (line[0] == '\0' || line[0] == '#')
			continue;
		words = g_strsplit_set(line, " \t", 2);
		if (words[1] != NULL)
			g_strstrip(words[1]);
		if (g_strcmp0(words[0], "admin") == 0)
			role = HR_API_ROLE_ADMIN;
		else if (g_strcmp0(words[0], "read") == 0)
			role = HR_API_ROLE_READ;
		else
			role = HR_API_ROLE_NONE;
		if (role == HR_API_ROLE_NONE || words[1] == NULL ||
		    strlen(words[1]) < HR_API_TOKEN_MIN || strpbrk(words[1], " \t") != NULL) {
			g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
				    "api_tokens %s line %u: expected \"admin TOKEN\" or \"read "
				    "TOKEN\", a token of at least %d characters without spaces",
				    path, i + 1, HR_API_TOKEN_MIN);
			return NULL;
		}
		g_ptr_array_add(tokens->tokens, g_strdup(words[1]));
		g_array_append_val(tokens->roles, role);
	}
	return g_steal_pointer(&tokens);
}

/* compares every byte, so the time says nothing about where they differ */
static gboolean
hr_api_token_equal(const gchar *a, const gchar *b)
{
	gsize la = strlen(a), lb = strlen(b);
	guint8 diff = la != lb;

	for (gsize i = 0; i < la; i++)
		diff |= (guint8)a[i] ^ (guint8)b[i % MAX(lb, 1)];
	return diff == 0;
}

HrApiRole
hr_api_tokens_lookup(HrApiTokens *tokens, const gchar *token)
{
	HrApiRole role = HR_API_ROLE_NONE;

	for (guint i = 0; i < tokens->tokens->len; i++) {
		if (hr_api_token_equal(token, g_ptr_array_index(tokens->tokens, i)))
			role = g_array_index(tokens->roles, HrApiRole, i);
	}
	return role;
}
