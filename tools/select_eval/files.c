/* files.c — listing a dataset directory's files for the readers (readers_internal.h).
 *
 * readdir order is the file system's: the list is sorted by name, so a dataset
 * of minute files is read in time order and two runs read the same order.
 */
#include "readers_internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int rt_sel_ds_list(const char *dir, const char *suffix, char ***out, size_t *n)
{
	*out = NULL;
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	size_t cap = 0;
	size_t sl = strlen(suffix);
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < sl || strcmp(e->d_name + l - sl, suffix) != 0)
			continue;
		size_t pl = strlen(dir) + l + 2;
		char *p = malloc(pl);
		if (!p || rt_sel_grow((void **)out, &cap, *n + 1, sizeof **out)) {
			free(p);
			break;
		}
		snprintf(p, pl, "%s/%s", dir, e->d_name);
		(*out)[(*n)++] = p;
	}
	closedir(d);
	if (*n)
		qsort(*out, *n, sizeof **out, cmp_str);
	return 0;
}

void rt_sel_ds_list_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
