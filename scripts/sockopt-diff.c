/*
 * sockopt-diff: getsockopt/setsockopt of every option number of SOL_SOCKET, SOL_TCP,
 * SOL_IP (an AF_INET socket) and SOL_IPV6 (an AF_INET6 one), on a fresh socket and
 * on a listener, with lengths 0 to 300 and values -1 to INT_MAX, printed one call a
 * line: once against the kernel, once against lowtide's shared object (through
 * packetdrill's interface, ../shared/tools/packetdrill/src/packetdrill.h), so that
 * `diff` shows where they differ (docs/linux-differences.md).
 *
 *   gcc -O1 -I../shared/tools/packetdrill/src -o /tmp/sockopt-diff scripts/sockopt-diff.c -ldl
 *   unshare -n /tmp/sockopt-diff > /tmp/kernel.txt
 *   /tmp/sockopt-diff target/release/liblowtide_packetdrill.so \
 *       "local_ip=127.0.0.1 remote_ip=127.0.0.2" > /tmp/lowtide.txt
 *   diff /tmp/kernel.txt /tmp/lowtide.txt
 *
 * Expected differences that are not rules: host settings (the kernel's
 * net.core.wmem_max/rmem_max and default congestion control are the host's),
 * TCP_TIMESTAMP's clock, HZ rounding (TCP_RTO_MIN_US), and the options lowtide does
 * not have (ENOPROTOOPT where Linux has them). Options that change the socket for
 * good (SO_BINDTODEVICE, filters, TCP_REPAIR, TCP_MD5SIG, TCP_ULP, strings) are only
 * read.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include "packetdrill.h"

static struct packetdrill_interface ifc;
static int so;
#define U ifc.userdata
static int S(int d, int t, int p) { return so ? ifc.socket(U, d, t, p) : socket(d, t, p); }
static int C(int fd) { return so ? ifc.close(U, fd) : close(fd); }
static int G(int fd, int l, int o, void *v, socklen_t *n) { return so ? ifc.getsockopt(U, fd, l, o, v, n) : getsockopt(fd, l, o, v, n); }
static int P(int fd, int l, int o, const void *v, socklen_t n) { return so ? ifc.setsockopt(U, fd, l, o, v, n) : setsockopt(fd, l, o, v, n); }
static int B(int fd, const struct sockaddr *a, socklen_t n) { return so ? ifc.bind(U, fd, a, n) : bind(fd, a, n); }
static int L(int fd, int b) { return so ? ifc.listen(U, fd, b) : listen(fd, b); }

static void pr(const char *tag, int rc, void *buf, socklen_t n) {
	printf("%s rc=%d", tag, rc);
	if (rc < 0) printf(" errno=%d", errno);
	else { printf(" len=%u ", n); for (unsigned i = 0; i < n && i < 40; i++) printf("%02x", ((unsigned char *)buf)[i]); }
	printf("\n");
}
static int mk(int fam, int state) {
	int fd = S(fam, SOCK_STREAM, 0);
	if (state == 1) {
		int one = 1; P(fd, SOL_SOCKET, SO_REUSEADDR, &one, 4);
		if (fam == AF_INET) { struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_port = htons(8080); B(fd, (void *)&a, sizeof a); }
		else { struct sockaddr_in6 a = {0}; a.sin6_family = AF_INET6; a.sin6_port = htons(8080); B(fd, (void *)&a, sizeof a); }
		L(fd, 5);
	}
	return fd;
}
int main(int argc, char **argv) {
	if (argc > 1) {
		void *h = dlopen(argv[1], RTLD_NOW); if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
		packetdrill_interface_init_t init = (packetdrill_interface_init_t)dlsym(h, "packetdrill_interface_init");
		init(argc > 2 ? argv[2] : NULL, &ifc); so = 1;
	}
	int levels[][3] = {{AF_INET, SOL_SOCKET, 80}, {AF_INET, IPPROTO_TCP, 50}, {AF_INET, IPPROTO_IP, 70}, {AF_INET6, IPPROTO_IPV6, 80}};
	int vals[] = {-1, 0, 1, 2, 255, 256, 65536, 0x7fffffff};
	char tag[128]; unsigned char buf[512];
	for (int st = 0; st < 2; st++)
	for (int li = 0; li < 4; li++) {
		int fam = levels[li][0], lev = levels[li][1];
		for (int o = 0; o <= levels[li][2]; o++) {
			if (lev == SOL_SOCKET && (o == 57 /*SO_COOKIE*/ )) continue;
			if (lev == IPPROTO_TCP && (o == 33 /*FASTOPEN_KEY*/)) continue;
			int lens[] = {0, 1, 2, 4, 8, 300};
			for (int k = 0; k < 6; k++) {
				int fd = mk(fam, st);
				socklen_t n = lens[k]; memset(buf, 0xaa, sizeof buf);
				int rc = G(fd, lev, o, buf, &n);
				snprintf(tag, sizeof tag, "st%d get l%d o%d len%d", st, lev, o, lens[k]);
				pr(tag, rc, buf, n);
				C(fd);
			}
			for (int v = 0; v < 8; v++) for (int sl = 0; sl < 4; sl++) {
				int slens[] = {4, 0, 2, 8};
				if (sl && v != 2) continue;
				if (lev == SOL_SOCKET && (o == 25 /*BINDTODEVICE*/ || o == 26 || o == 27 || o == 50 || o == 51)) continue;
				if (lev == IPPROTO_TCP && (o == 13 || o == 14 || o == 19 || o == 21 || o == 22 || o == 29 || o == 31 || o == 32 || o == 33)) continue;
				int fd = mk(fam, st);
				unsigned char in[8]; memset(in, 0, 8); memcpy(in, &vals[v], 4);
				int rc = P(fd, lev, o, in, slens[sl]);
				snprintf(tag, sizeof tag, "st%d set l%d o%d v%d len%d", st, lev, o, vals[v], slens[sl]);
				printf("%s rc=%d", tag, rc); if (rc < 0) printf(" errno=%d", errno); printf("\n");
				socklen_t n = 64; memset(buf, 0xaa, sizeof buf);
				rc = G(fd, lev, o, buf, &n);
				snprintf(tag, sizeof tag, "  after");
				pr(tag, rc, buf, n);
				C(fd);
			}
		}
	}
	return 0;
}
