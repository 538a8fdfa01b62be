/* pmix/nspace.c — the attempt's namespace as libpmix is told it: the
 * job's map from LAUNCH ("nodes", "ppn"), the job-, app-, node- and
 * per-process data, registered (and deregistered) on the loop with a
 * bounded wait for the library's answer (server.c's psrv_op_wait_for). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hwloc.h>

#include "agent/pmix/pmix_int.h"

static void info_u32(pmix_info_t *i, const char *key, uint32_t v)
{
	PMIX_INFO_LOAD(i, key, &v, PMIX_UINT32);
}

static void info_str(pmix_info_t *i, const char *key, const char *v)
{
	PMIX_INFO_LOAD(i, key, v, PMIX_STRING);
}

/* Job info for the attempt's namespace, from LAUNCH's "pmix" object:
 *   {"nspace", "nodes": "h1,h2" (node order), "ppn": "0,1;2,3" (ranks
 *    per node, same order), "job_size", "num_nodes", "node_id",
 *    "hostname", "local": [ranks here]}
 * and LAUNCH's ranks (same order as "local") for their cpusets. */
/* The rank's binding, published as PMIX_CPUSET and PMIX_LOCALITY_STRING
 * (what MPI uses to tell which peers share a socket or NUMA node), where
 * the library can make them.  Fills pi[0..] and returns how many. */
static size_t cpuset_info(pmix_info_t *pi, const char *cpus)
{
	hwloc_bitmap_t b;
	pmix_cpuset_t cs;
	char *str = NULL;
	size_t n = 0;

	if (!cpus || !cpus[0] || !(b = hwloc_bitmap_alloc()))
		return 0;
	if (hwloc_bitmap_list_sscanf(b, cpus) == 0) {
		cs.source = "hwloc";
		cs.bitmap = b;
		if (PMIx_server_generate_cpuset_string(&cs, &str) ==
			PMIX_SUCCESS &&
		    str) {
			PMIX_INFO_LOAD(&pi[n++], PMIX_CPUSET, str, PMIX_STRING);
			free(str);
			str = NULL;
		}
		if (PMIx_server_generate_locality_string(&cs, &str) ==
			PMIX_SUCCESS &&
		    str) {
			PMIX_INFO_LOAD(&pi[n++], PMIX_LOCALITY_STRING, str,
				       PMIX_STRING);
			free(str);
		}
	}
	hwloc_bitmap_free(b);
	return n;
}

void psrv_job_map_free(struct job_map *m)
{
	free(m->hosts_buf);
	free(m->ppn_buf);
	free(m->host);
	free(m->peers);
	free(m->nsize);
	free(m->node_of);
	free(m->lrank_of);
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == c;
	return n;
}

/* 0, or -1 with err: every rank 0..job_size-1 placed once, as many ppn
 * segments as nodes, at most 65535 ranks a node. */
int psrv_job_map_parse(struct job_map *m, const char *nodes, const char *ppn,
		       uint32_t job_size, struct herd_err *err)
{
	char *save = NULL, *tok;
	size_t i = 0;

	memset(m, 0, sizeof(*m));
	m->job_size = job_size;
	m->nnodes = count_char(nodes, ',') + 1;
	if (count_char(ppn, ';') + 1 != m->nnodes)
		return herd_errprintf(err,
				      "LAUNCH's pmix map: %zu nodes, "
				      "%zu rank lists",
				      m->nnodes, count_char(ppn, ';') + 1);
	m->hosts_buf = strdup(nodes);
	m->ppn_buf = strdup(ppn);
	m->host = calloc(m->nnodes, sizeof(*m->host));
	m->peers = calloc(m->nnodes, sizeof(*m->peers));
	m->nsize = calloc(m->nnodes, sizeof(*m->nsize));
	m->node_of = malloc(job_size * sizeof(*m->node_of));
	m->lrank_of = malloc(job_size * sizeof(*m->lrank_of));
	if (!m->hosts_buf || !m->ppn_buf || !m->host || !m->peers ||
	    !m->nsize || !m->node_of || !m->lrank_of)
		return herd_errprintf(err, "out of memory");
	for (uint32_t r = 0; r < job_size; r++)
		m->node_of[r] = UINT32_MAX;
	for (tok = strtok_r(m->hosts_buf, ",", &save); tok && i < m->nnodes;
	     tok = strtok_r(NULL, ",", &save))
		m->host[i++] = tok;
	if (i != m->nnodes)
		return herd_errprintf(err, "LAUNCH's pmix map: empty host");
	/* Segments may be empty (";;"): split by hand. */
	tok = m->ppn_buf;
	for (i = 0; i < m->nnodes; i++) {
		char *end = strchr(tok, ';'), *p;

		if (end)
			*end = '\0';
		m->peers[i] = tok;
		for (p = tok; *p;) {
			char *e;
			unsigned long r = strtoul(p, &e, 10);

			if (e == p || r >= job_size ||
			    m->node_of[r] != UINT32_MAX ||
			    m->nsize[i] >= UINT16_MAX || (*e && *e != ','))
				return herd_errprintf(err,
						      "LAUNCH's pmix map: bad "
						      "rank list \"%.40s\"",
						      tok);
			m->node_of[r] = (uint32_t)i;
			m->lrank_of[r] = (uint16_t)m->nsize[i]++;
			p = *e ? e + 1 : e;
		}
		tok = end ? end + 1 : tok + strlen(tok);
	}
	for (uint32_t r = 0; r < job_size; r++)
		if (m->node_of[r] == UINT32_MAX)
			return herd_errprintf(err,
					      "LAUNCH's pmix map: rank "
					      "%u is on no node",
					      r);
	return 0;
}

/* The ranks' working directory, absolute (launch.workdir, relative to
 * where the agent runs, or that directory). */
static void job_wdir(json_t *launch, char *buf, size_t len)
{
	const char *wd = json_string_value(json_object_get(launch, "workdir"));
	char cwd[4096];

	if (wd && wd[0] == '/') {
		snprintf(buf, len, "%s", wd);
		return;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	if (wd && wd[0] && snprintf(buf, len, "%s/%s", cwd, wd) < (int)len)
		return;
	snprintf(buf, len, "%s", cwd);
}

pmix_info_t *psrv_info_array(pmix_info_t *i, const char *key, size_t n,
			     pmix_data_array_t **out)
{
	pmix_data_array_t *d;

	PMIX_DATA_ARRAY_CREATE(d, n, PMIX_INFO);
	PMIX_LOAD_KEY(i->key, key);
	i->value.type = PMIX_DATA_ARRAY;
	i->value.data.darray = d;
	if (out)
		*out = d;
	return d ? (pmix_info_t *)d->array : NULL;
}

/* Registers the attempt's namespace: the job (maps, sizes, directories),
 * its one app, every node and EVERY rank of the job (not only this
 * node's: a rank may ask for a remote rank's node, local rank...), with
 * this node's ranks' bindings. */
int psrv_nspace_register(struct agent *a, json_t *launch, json_t *pj,
			 json_t *ranks, struct herd_err *err)
{
	struct psrv_state *p = a->pmix;
	const char *nodes = json_string_value(json_object_get(pj, "nodes"));
	const char *ppn = json_string_value(json_object_get(pj, "ppn"));
	const char *host = json_string_value(json_object_get(pj, "hostname"));
	json_t *local = json_object_get(pj, "local");
	uint32_t job_size =
	    (uint32_t)json_integer_value(json_object_get(pj, "job_size"));
	uint32_t node_id =
	    (uint32_t)json_integer_value(json_object_get(pj, "node_id"));
	size_t nlocal = json_array_size(local), ninfo = 0, k = 0;
	char *node_regex = NULL, *proc_regex = NULL, wdir[4096];
	const char *topo;
	struct job_map m;
	pmix_info_t *info = NULL;
	pmix_status_t rc;
	const bool no = false;
	int ret = -1;

	memset(&m, 0, sizeof(m));
	if (!nodes || !ppn || !host || !json_is_array(local) || !job_size ||
	    job_size > PSRV_JOB_RANKS_MAX)
		return herd_errprintf(err, "LAUNCH lacks the pmix job map");
	if (psrv_job_map_parse(&m, nodes, ppn, job_size, err) < 0)
		goto out;
	/* This node: the one holding its first rank (the map's order). */
	if (nlocal) {
		json_int_t r0 = json_integer_value(json_array_get(local, 0));

		if (r0 < 0 || r0 >= job_size)
			goto bad_local;
		node_id = m.node_of[r0];
		for (size_t i = 0; i < nlocal; i++) {
			json_int_t r =
			    json_integer_value(json_array_get(local, i));

			if (r < 0 || r >= job_size || m.node_of[r] != node_id ||
			    m.lrank_of[r] != i)
				goto bad_local;
		}
	}
	if (PMIx_generate_regex(nodes, &node_regex) != PMIX_SUCCESS ||
	    PMIx_generate_ppn(ppn, &proc_regex) != PMIX_SUCCESS) {
		herd_errprintf(err, "cannot encode the job map for PMIx");
		goto out;
	}
	job_wdir(launch, wdir, sizeof(wdir));
	snprintf(p->nsdir, sizeof(p->nsdir), "%s/%s", p->tmpdir, p->nspace);
	if (mkdir(p->nsdir, 0700) < 0 && errno != EEXIST) {
		herd_errprintf(err, "cannot create %s: %s", p->nsdir,
			       strerror(errno));
		goto out;
	}

	ninfo = 25 + m.nnodes + job_size;
	PMIX_INFO_CREATE(info, ninfo);
	if (!info) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	PMIX_INFO_LOAD(&info[k++], PMIX_NODE_MAP, node_regex, PMIX_REGEX);
	PMIX_INFO_LOAD(&info[k++], PMIX_PROC_MAP, proc_regex, PMIX_REGEX);
	info_u32(&info[k++], PMIX_JOB_SIZE, job_size);
	info_u32(&info[k++], PMIX_MAX_PROCS, job_size);
	info_u32(&info[k++], PMIX_UNIV_SIZE, job_size);
	info_u32(&info[k++], PMIX_NUM_NODES, (uint32_t)m.nnodes);
	info_u32(&info[k++], PMIX_JOB_NUM_APPS, 1);
	info_str(&info[k++], PMIX_JOBID, p->nspace);
	PMIX_INFO_LOAD(&info[k++], PMIX_SPAWNED, &no, PMIX_BOOL);
	info_str(&info[k++], PMIX_WDIR, wdir);
	info_str(&info[k++], PMIX_TMPDIR, p->tmpdir);
	info_str(&info[k++], PMIX_NSDIR, p->nsdir);
	/* This node (the library's local view). */
	if (nlocal && (topo = psrv_topo_xml(a)))
		info_str(&info[k++], PMIX_LOCAL_TOPO, topo);
	if (nlocal) {
		info_u32(&info[k++], PMIX_LOCAL_SIZE, (uint32_t)nlocal);
		info_u32(&info[k++], PMIX_NODE_SIZE, (uint32_t)nlocal);
		info_str(&info[k++], PMIX_LOCAL_PEERS, m.peers[node_id]);
		PMIX_INFO_LOAD(&info[k++], PMIX_LOCALLDR,
			       &(pmix_rank_t){(pmix_rank_t)json_integer_value(
				   json_array_get(local, 0))},
			       PMIX_PROC_RANK);
	}
	info_u32(&info[k++], PMIX_NODEID, node_id);
	info_str(&info[k++], PMIX_HOSTNAME, host);
	info_u32(&info[k++], PMIX_APPNUM, 0);
	/* The one app. */
	{
		pmix_data_array_t *d;
		pmix_info_t *ai =
		    psrv_info_array(&info[k++], PMIX_APP_INFO_ARRAY, 4, &d);
		pmix_rank_t ldr = 0;

		info_u32(&ai[0], PMIX_APPNUM, 0);
		info_u32(&ai[1], PMIX_APP_SIZE, job_size);
		PMIX_INFO_LOAD(&ai[2], PMIX_APPLDR, &ldr, PMIX_PROC_RANK);
		info_str(&ai[3], PMIX_WDIR, wdir);
	}
	/* Every node. */
	for (size_t i = 0; i < m.nnodes; i++) {
		pmix_data_array_t *d;
		pmix_info_t *ni =
		    psrv_info_array(&info[k++], PMIX_NODE_INFO_ARRAY, 6, &d);
		pmix_rank_t ldr = 0;

		info_u32(&ni[0], PMIX_NODEID, (uint32_t)i);
		info_str(&ni[1], PMIX_HOSTNAME, m.host[i]);
		info_u32(&ni[2], PMIX_LOCAL_SIZE, m.nsize[i]);
		info_u32(&ni[3], PMIX_NODE_SIZE, m.nsize[i]);
		info_str(&ni[4], PMIX_LOCAL_PEERS, m.peers[i]);
		d->size = 5;
		if (m.nsize[i]) { /* the first of its list */
			ldr = (pmix_rank_t)strtoul(m.peers[i], NULL, 10);
			PMIX_INFO_LOAD(&ni[5], PMIX_LOCALLDR, &ldr,
				       PMIX_PROC_RANK);
			d->size = 6;
		}
	}
	/* Every rank: PMIX_RANK first (the library finds a rank's data by
	 * it); this node's also get
	 * their binding. */
	for (uint32_t r = 0; r < job_size; r++) {
		pmix_data_array_t *d;
		pmix_info_t *pi =
		    psrv_info_array(&info[k++], PMIX_PROC_DATA, 10, &d);
		pmix_rank_t rank = r;
		uint16_t lr = m.lrank_of[r];
		uint32_t nid = m.node_of[r];

		PMIX_INFO_LOAD(&pi[0], PMIX_RANK, &rank, PMIX_PROC_RANK);
		PMIX_INFO_LOAD(&pi[1], PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
		PMIX_INFO_LOAD(&pi[2], PMIX_NODE_RANK, &lr, PMIX_UINT16);
		info_u32(&pi[3], PMIX_APPNUM, 0);
		PMIX_INFO_LOAD(&pi[4], PMIX_APP_RANK, &rank, PMIX_PROC_RANK);
		PMIX_INFO_LOAD(&pi[5], PMIX_GLOBAL_RANK, &rank, PMIX_PROC_RANK);
		info_u32(&pi[6], PMIX_NODEID, nid);
		info_str(&pi[7], PMIX_HOSTNAME, m.host[nid]);
		d->size = 8;
		if (nlocal && nid == node_id)
			d->size += cpuset_info(
			    &pi[8], json_string_value(json_object_get(
					json_array_get(ranks, lr), "cpus")));
	}
	rc = psrv_register_nspace_wait(p, p->nspace, (int)nlocal, info, k);
	if (rc != PMIX_SUCCESS) {
		herd_errprintf(err, "PMIx_server_register_nspace: %s",
			       PMIx_Error_string(rc));
		goto out;
	}
	p->nspace_registered = true;
	p->job_size = job_size;
	{
		const char **rh = malloc(job_size * sizeof(*rh));
		bool *loc = calloc(job_size, sizeof(*loc));

		for (uint32_t r = 0; rh && loc && r < job_size; r++) {
			rh[r] = m.host[m.node_of[r]];
			loc[r] = nlocal && m.node_of[r] == node_id;
		}
		if (rh && loc)
			psrv_api_job_set(p->nspace, job_size, rh, loc,
					 json_string_value(json_object_get(
					     launch, "command")));
		free(rh);
		free(loc);
	}
	ret = 0;
	goto out;
bad_local:
	herd_errprintf(err, "LAUNCH's pmix map: this node's ranks are not "
			    "one node's of the map");
out:
	if (info)
		PMIX_INFO_FREE(info, ninfo);
	free(node_regex);
	free(proc_regex);
	psrv_job_map_free(&m);
	return ret;
}

pmix_status_t psrv_register_nspace_wait(struct psrv_state *p,
					const char *nspace, int nlocal,
					pmix_info_t *info, size_t ninfo)
{
	const char *peers = NULL;
	struct op_wait *w;
	pmix_status_t rc;

	if (p->wedged)
		return PMIX_ERR_TIMEOUT;
	if (!(w = psrv_op_wait_new()))
		return PMIX_ERR_NOMEM;
	for (size_t i = 0; i < ninfo; i++)
		if (PMIX_CHECK_KEY(&info[i], PMIX_LOCAL_PEERS) &&
		    info[i].value.type == PMIX_STRING)
			peers = info[i].value.data.string;
	/* Known before the library can see a fence naming it. */
	psrv_fence_hold_add(nspace, nlocal, peers);
	rc =
	    psrv_op_wait_for(p, w,
			     PMIx_server_register_nspace(
				 nspace, nlocal, info, ninfo, psrv_op_done, w));
	if (rc != PMIX_SUCCESS)
		psrv_fence_hold_remove(nspace);
	return rc;
}

void psrv_deregister_nspace_wait(struct psrv_state *p, const char *nspace)
{
	struct op_wait *w;

	if (!p->wedged && (w = psrv_op_wait_new())) {
		PMIx_server_deregister_nspace(nspace, psrv_op_done, w);
		psrv_op_wait_for(p, w, PMIX_SUCCESS);
	}
	psrv_fence_hold_remove(nspace);
}

size_t psrv_cpuset_info(pmix_info_t *pi, const char *cpus)
{
	return cpuset_info(pi, cpus);
}

void psrv_nspace_deregister(struct psrv_state *p)
{
	struct op_wait *w;

	if (!p->nspace_registered)
		return;
	p->nspace_registered = false;
	psrv_api_job_set(NULL, 0, NULL, NULL, NULL);
	if (p->wedged || !(w = psrv_op_wait_new())) {
		psrv_fence_hold_remove(p->nspace);
		return;
	}
	PMIx_server_deregister_nspace(p->nspace, psrv_op_done, w);
	psrv_op_wait_for(p, w, PMIX_SUCCESS);
	psrv_fence_hold_remove(p->nspace);
	if (p->nsdir[0])
		rmdir(p->nsdir); /* a rank's files stay, with run_dir */
}
