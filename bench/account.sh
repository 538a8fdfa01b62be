# bench/account.sh — sourced by benchmarks (bash): the remote account that
# every tool of a benchmark logs in as.
#
#   bench_account ACCOUNT WORK DIR
#       ACCOUNT clean: makes a temporary user with Debian's default
#       dotfiles (/etc/skel: its ~/.bashrc returns at once for a
#       non-interactive shell), home WORK/home, allowed in by the cluster
#       in DIR (whose sshd also reads a user's own authorized_keys; the
#       cluster's shared one becomes readable, its private key stays
#       0600).  ACCOUNT root: this machine's root, whose ~/.bashrc may do
#       expensive work (pyenv) on every remote command of every tool.
#       Sets BUSER (the user made, to remove with `userdel`; empty for
#       root), RHOME (its home), SSH_CONFIG (an ssh config naming it) and
#       HERD_USER (the `user: NAME, ` to put into a job's ssh: map).
bench_account() {
	SSH_CONFIG=$HERD_CLUSTER_SSH_CONFIG
	RHOME=$HOME
	HERD_USER=
	BUSER=
	case $1 in
	root) return 0 ;;
	clean) ;;
	*) echo "BENCH_ACCOUNT must be clean or root, not $1" >&2; return 1 ;;
	esac
	BUSER=herd-bench-$$
	RHOME=$2/home
	useradd -M -d "$RHOME" -s /bin/bash -p '*' "$BUSER" || { BUSER=; return 1; }
	mkdir -p "$RHOME" && cp -r /etc/skel/. "$RHOME/" &&
		chown -R "$BUSER:" "$RHOME" &&
		chmod 711 "$2" "$3" "$3/nodes" "$3"/nodes/* &&
		chmod 644 "$3"/nodes/*/authorized_keys || return 1
	sed "s/^\([[:space:]]*User\) .*/\1 $BUSER/" "$HERD_CLUSTER_SSH_CONFIG" >"$2/ssh_config" || return 1
	SSH_CONFIG=$2/ssh_config
	HERD_USER="user: $BUSER, "
}
