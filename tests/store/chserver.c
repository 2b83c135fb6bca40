/*
 * tests/store/chserver.c — start and stop a private clickhouse-server.
 *
 * 18.16 runs as any user given writable paths: everything it writes (data,
 * tmp, user files, logs, the pid file) lives under a mkdtemp directory, and
 * the config names it. Ports are found free by binding port 0; the server is
 * ready once HTTP answers SELECT 1 (store/http.c, the backend's own client).
 */
#include "chserver.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

const char *chs_binary(void)
{
	const char *b = getenv("CLICKHOUSE_SERVER");
	if (!b || !*b)
		b = "/usr/sbin/clickhouse-server";
	return access(b, X_OK) == 0 ? b : NULL;
}

int chs_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

static int write_config(struct chserver *c, const char *remote, int inter)
{
	char path[512], *xml = NULL;
	int rc;
	if (asprintf(&xml,
		     "<?xml version=\"1.0\"?>\n<yandex>\n"
		     "  <logger><level>warning</level><log>%1$s/server.log</log>"
		     "<errorlog>%1$s/server.err.log</errorlog><size>10M</size><count>1</count></logger>\n"
		     "  <listen_host>127.0.0.1</listen_host>\n"
		     "  <http_port>%2$d</http_port>\n  <tcp_port>%3$d</tcp_port>\n"
		     "  <interserver_http_port>%4$d</interserver_http_port>\n"
		     "  <interserver_http_host>127.0.0.1</interserver_http_host>\n"
		     "  <path>%1$s/data/</path>\n  <tmp_path>%1$s/tmp/</tmp_path>\n"
		     "  <user_files_path>%1$s/user_files/</user_files_path>\n"
		     "  <format_schema_path>%1$s/format_schemas/</format_schema_path>\n"
		     "  <users_config>%1$s/users.xml</users_config>\n"
		     "  <default_profile>default</default_profile>\n"
		     "  <default_database>default</default_database>\n"
		     "  <timezone>UTC</timezone>\n"
		     "  <mark_cache_size>67108864</mark_cache_size>\n"
		     "  <uncompressed_cache_size>67108864</uncompressed_cache_size>\n"
		     "  <keep_alive_timeout>30</keep_alive_timeout>\n"
		     "  <remote_servers>%5$s</remote_servers>\n"
		     "</yandex>\n",
		     c->dir, c->http_port, c->tcp_port, inter, remote ? remote : "") < 0)
		return -1;
	snprintf(path, sizeof path, "%s/config.xml", c->dir);
	rc = write_file(path, xml);
	free(xml);
	if (rc)
		return -1;
	snprintf(path, sizeof path, "%s/users.xml", c->dir);
	return write_file(path,
			  "<?xml version=\"1.0\"?>\n<yandex>\n"
			  "  <profiles><default><max_memory_usage>2000000000</max_memory_usage>"
			  "<max_threads>2</max_threads></default></profiles>\n"
			  "  <users><default><password></password>"
			  "<networks><ip>127.0.0.1</ip><ip>::1</ip></networks>"
			  "<profile>default</profile><quota>default</quota></default></users>\n"
			  "  <quotas><default><interval><duration>3600</duration><queries>0</queries>"
			  "<errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows>"
			  "<execution_time>0</execution_time></interval></default></quotas>\n"
			  "</yandex>\n");
}

static void log_tail(const struct chserver *c, char *why, size_t whylen)
{
	char path[512], buf[1024];
	size_t used = strlen(why);
	const char *names[] = { "stdout.log", "server.err.log" };
	for (int i = 0; i < 2 && used + 2 < whylen; i++) {
		FILE *f;
		long sz;
		size_t n;
		snprintf(path, sizeof path, "%s/%s", c->dir, names[i]);
		if (!(f = fopen(path, "r")))
			continue;
		fseek(f, 0, SEEK_END);
		sz = ftell(f);
		fseek(f, sz > (long)sizeof buf - 1 ? sz - (long)sizeof buf + 1 : 0, SEEK_SET);
		n = fread(buf, 1, sizeof buf - 1, f);
		buf[n] = 0;
		fclose(f);
		used += (size_t)snprintf(why + used, whylen - used, "\n[%s] %s", names[i], buf);
		if (used >= whylen)
			break;
	}
}

int chs_sql(const struct chserver *c, const char *sql, char **reply)
{
	struct rt_http h;
	struct rt_buf r = { 0 };
	int status = 0, rc;
	rt_http_init(&h, "127.0.0.1", c->http_port, 30000);
	rc = rt_http_post(&h, "/", sql, strlen(sql), &status, &r);
	rt_http_close(&h);
	if (reply) {
		*reply = calloc(1, r.len + 1);
		if (*reply && r.len)
			memcpy(*reply, r.p, r.len);
	}
	rt_buf_free(&r);
	return rc == 0 && status == 200 ? 0 : -1;
}

int chs_start(struct chserver *c, const char *remote_servers, char *why, size_t whylen)
{
	return chs_start_on(c, 0, 0, remote_servers, why, whylen);
}

int chs_start_on(struct chserver *c, int http_port, int tcp_port, const char *remote_servers,
		 char *why, size_t whylen)
{
	const char *bin = chs_binary(), *tmp = getenv("TMPDIR");
	char cfg[512], out[512];
	int inter;
	memset(c, 0, sizeof *c);
	why[0] = 0;
	if (!bin) {
		snprintf(why, whylen, "clickhouse-server is not installed");
		return -1;
	}
	snprintf(c->dir, sizeof c->dir, "%s/rt-ch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(c->dir)) {
		snprintf(why, whylen, "mkdtemp: %s", strerror(errno));
		return -1;
	}
	c->http_port = http_port ? http_port : chs_free_port();
	c->tcp_port = tcp_port ? tcp_port : chs_free_port();
	inter = chs_free_port();
	if (c->http_port < 0 || c->tcp_port < 0 || inter < 0 ||
	    write_config(c, remote_servers, inter)) {
		snprintf(why, whylen, "cannot set up %s", c->dir);
		return -1;
	}
	snprintf(c->url, sizeof c->url, "clickhouse://127.0.0.1:%d", c->http_port);
	snprintf(cfg, sizeof cfg, "--config-file=%s/config.xml", c->dir);
	snprintf(out, sizeof out, "%s/stdout.log", c->dir);
	c->pid = fork();
	if (c->pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		return -1;
	}
	if (c->pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setpgid(0, 0);
		execl(bin, bin, cfg, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 600; i++) {
		int st;
		struct timespec ts = { 0, 100000000 };
		if (chs_sql(c, "SELECT 1", NULL) == 0)
			return 0;
		if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
			c->pid = 0;
			snprintf(why, whylen, "clickhouse-server exited at start (status %d)", st);
			log_tail(c, why, whylen);
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	snprintf(why, whylen, "clickhouse-server did not answer on port %d within 60 s",
		 c->http_port);
	log_tail(c, why, whylen);
	chs_stop(c);
	return -1;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void chs_stop(struct chserver *c)
{
	if (c->pid > 0) {
		int st;
		kill(c->pid, SIGTERM);
		for (int i = 0; i < 150; i++) {
			struct timespec ts = { 0, 100000000 };
			if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
				c->pid = 0;
				break;
			}
			nanosleep(&ts, NULL);
		}
		if (c->pid > 0) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &st, 0);
		}
		c->pid = 0;
	}
	if (c->dir[0] && !getenv("RETRACE_KEEP_CH"))
		nftw(c->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	c->dir[0] = 0;
}
