/* pypkg.h — the herd Python package (python/herd/NAME.py) inside the
 * agent's image.  scripts/pypkg-image.sh generates the table at build
 * time (build/agent/pypkg_image.c) from every file of python/herd/. */
#ifndef HERD_AGENT_PYPKG_H
#define HERD_AGENT_PYPKG_H

struct pypkg_file {
	const char *name;	   /* "metrics.py": a plain file name */
	const unsigned char *data; /* its bytes, as built */
	const unsigned char *end;  /* one past the last */
};

/* Terminated by an entry whose name is NULL. */
extern const struct pypkg_file pypkg_files[];

#endif
