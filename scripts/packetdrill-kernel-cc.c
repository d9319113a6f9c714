/*
 * LD_PRELOAD shim for `scripts/packetdrill --kernel` (not part of lowtide).
 *
 * Upstream's scripts expect cubic as the namespace's default congestion control
 * (common/defaults.sh: sysctl net.ipv4.tcp_congestion_control=cubic). A network
 * namespace other than the host's may only choose a default from the global
 * net.ipv4.tcp_allowed_congestion_control (tcp_set_default_congestion_control:
 * -EPERM otherwise), and changing that list would change the host. So the runner
 * mounts a regular file over the namespace's tcp_congestion_control, where the
 * script's sysctl lands, and this shim gives each TCP socket packetdrill opens the
 * file's algorithm with setsockopt(TCP_CONGESTION), which a CAP_NET_ADMIN caller
 * may do for any available algorithm (tcp_set_congestion_control). A listener's
 * children keep it (tcp_ca_openreq_child). Nothing is set while the file still
 * names the namespace's real default.
 *
 * Environment: LOWTIDE_KCC_FILE (the file), LOWTIDE_KCC_REAL (the real default).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* include/net/tcp.h */
#define TCP_CA_NAME_MAX 16

/* The algorithm the script asked for, or "" when it is the real default. */
static void wanted_cc(char *name, size_t len)
{
	const char *path = getenv("LOWTIDE_KCC_FILE");
	const char *real = getenv("LOWTIDE_KCC_REAL");
	FILE *f;

	name[0] = '\0';
	if (!path || !real || !(f = fopen(path, "r")))
		return;
	if (!fgets(name, (int)len, f))
		name[0] = '\0';
	fclose(f);
	name[strcspn(name, " \t\n")] = '\0';
	if (!strcmp(name, real))
		name[0] = '\0';
}

int socket(int domain, int type, int protocol)
{
	static int (*real_socket)(int, int, int);
	char name[TCP_CA_NAME_MAX + 1];
	int fd;

	if (!real_socket)
		real_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	fd = real_socket(domain, type, protocol);
	if (fd < 0 || (domain != AF_INET && domain != AF_INET6) ||
	    (type & 0xf) != SOCK_STREAM ||
	    (protocol != 0 && protocol != IPPROTO_TCP))
		return fd;
	wanted_cc(name, sizeof(name));
	if (name[0] &&
	    setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, strlen(name)) < 0)
		fprintf(stderr, "lowtide: packetdrill --kernel: TCP_CONGESTION %s: %m\n", name);
	return fd;
}
