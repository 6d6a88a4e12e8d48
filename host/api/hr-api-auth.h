/* SPDX-License-Identifier: GPL-2.0-only */
#pragma once

/*
 * Who may use the API (host/API.md "Access"). On the Unix socket the peer's
 * credentials decide: root and the daemon's own uid are admins, members of
 * api_group too, members of api_read_group may read. On TCP (always TLS)
 * a bearer token from the api_tokens file decides.
 */

#include <gio/gio.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef enum {
	HR_API_ROLE_NONE,
	HR_API_ROLE_READ,  /* GET routes and the event stream */
	HR_API_ROLE_ADMIN, /* everything */
} HrApiRole;

const gchar *
hr_api_role_to_string(HrApiRole role);

/* a group's gid by name, or by number; FALSE with @error when unknown */
gboolean
hr_api_group_lookup(const gchar *name, gid_t *gid, GError **error);

/*
 * The role of the peer of a Unix socket connection: @admin_gid and
 * @read_gid are (gid_t)-1 when not configured. NONE sets @error saying
 * why. *@principal is who the peer is, for what it owns (a reservation it
 * made): "uid:N", NULL when its credentials cannot be read. One read of
 * the peer's credentials for both.
 */
HrApiRole
hr_api_peer_role(GSocket *socket, gid_t admin_gid, gid_t read_gid, gchar **principal,
		 GError **error);

typedef struct _HrApiTokens HrApiTokens;

/*
 * Lines "admin TOKEN" or "read TOKEN", '#' comments and blank lines; a
 * token has at least 16 characters. The file must be a regular file
 * (no symlink) owned by root or the daemon's user, neither readable nor
 * writable by its group or others (hr-safefile.h).
 */
HrApiTokens *
hr_api_tokens_load(const gchar *path, GError **error);
void
hr_api_tokens_free(HrApiTokens *tokens);
/* "token:" and the first 16 hex digits of the token's SHA-256: not the token itself */
gchar *
hr_api_token_principal(const gchar *token);
/* NONE for an unknown token */
HrApiRole
hr_api_tokens_lookup(HrApiTokens *tokens, const gchar *token);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(HrApiTokens, hr_api_tokens_free)

G_END_DECLS
