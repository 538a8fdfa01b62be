/* fake_nvml.c — a stand-in for libnvidia-ml.so.1 that the tests build
 * (build/tests/libnvidia-ml.so.1) and put on LD_LIBRARY_PATH.  It
 * implements exactly the NVML calls herd-agent makes (agent/nvml.c),
 * with NVML's ABI, and answers with values scripted in the file named by
 * $FAKE_NVML_VALUES (the fake's own knob; herd knows nothing of it).  The
 * file is read again whenever it changes, so a test can change values
 * while the agent runs.  Lines:
 *
 *   # a comment
 *   init CODE          nvmlInit_v2 returns CODE (an nvmlReturn_t; 0)
 *   count N            GPUs (0..64; default 0)
 *   GPU KEY VALUE      GPU's KEY: util mem_used mem_total temp power
 *                      sm_mhz ecc_corrected ecc_uncorrected throttle
 *                      retired_pending (0 or 1: pages waiting to be
 *                      retired, what the health gate looks at with
 *                      ecc_uncorrected: "1 ecc_uncorrected 3" makes GPU 1
 *                      fail `herd check`);
 *                      VALUE "-": NVML_ERROR_NOT_SUPPORTED
 *   GPU xid VALUE      an Xid event; delivered once each time VALUE
 *                      changes (nvmlEventSetWait_v2)
 *
 * A call with an argument herd should never pass (a sensor other than
 * the GPU's, a clock other than SM, an ECC counter other than volatile,
 * an unknown device) returns NVML_ERROR_INVALID_ARGUMENT, so a mistake in
 * herd shows as a missing value in the tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define OK 0
#define ERR_UNINITIALIZED 1
#define ERR_INVALID_ARGUMENT 2
#define ERR_NOT_SUPPORTED 3
#define ERR_TIMEOUT 10
#define MAXGPU 64

enum key { UTIL, MEM_USED, MEM_TOTAL, TEMP, POWER, SM, ECC_C, ECC_U, THROTTLE, XID, RETIRED, NKEYS };
static const char *const key_names[NKEYS] = {
	"util", "mem_used", "mem_total", "temp", "power", "sm_mhz",
	"ecc_corrected", "ecc_uncorrected", "throttle", "xid",
	"retired_pending"};

struct fake_gpu {
	int index;
	unsigned long long v[NKEYS];
	int set[NKEYS];	/* 0 unset (NOT_SUPPORTED), 1 set */
	unsigned long long xid_sent;
	int xid_any_sent;
};

typedef struct fake_gpu *nvmlDevice_t;
typedef struct {
	unsigned gpu, memory;
} nvmlUtilization_t;
typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType, eventData;
	unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
typedef struct fake_set {
	int n;
} *nvmlEventSet_t;

static struct fake_gpu gpus[MAXGPU];
static unsigned n_gpus;
static int init_code;
static int inited;
static struct timespec seen_mtime;
static off_t seen_size = -1;
static int registered[MAXGPU];

static void load(void)
{
	const char *path = getenv("FAKE_NVML_VALUES");
	struct stat st;
	char line[256];
	FILE *f;

	if (!path || stat(path, &st) < 0)
		return;
	if (st.st_size == seen_size && st.st_mtim.tv_sec == seen_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == seen_mtime.tv_nsec)
		return;
	f = fopen(path, "r");
	if (!f)
		return;
	seen_size = st.st_size;
	seen_mtime = st.st_mtim;
	init_code = 0;
	n_gpus = 0;
	for (int i = 0; i < MAXGPU; i++) {
		memset(gpus[i].set, 0, sizeof(gpus[i].set));
		gpus[i].index = i;
	}
	while (fgets(line, sizeof(line), f)) {
		char a[64], b[64], c[64];
		int n = sscanf(line, "%63s %63s %63s", a, b, c);

		if (n < 2 || a[0] == '#')
			continue;
		if (!strcmp(a, "init")) {
			init_code = (int)strtol(b, NULL, 10);
		} else if (!strcmp(a, "count")) {
			n_gpus = (unsigned)strtoul(b, NULL, 10);
			if (n_gpus > MAXGPU)
				n_gpus = MAXGPU;
		} else if (n == 3) {
			long g = strtol(a, NULL, 10);

			if (g < 0 || g >= MAXGPU)
				continue;
			for (int k = 0; k < NKEYS; k++) {
				if (strcmp(b, key_names[k]))
					continue;
				gpus[g].set[k] = strcmp(c, "-") != 0;
				gpus[g].v[k] = strtoull(c, NULL, 10);
			}
		}
	}
	fclose(f);
}

static int dev_ok(nvmlDevice_t d)
{
	load();
	return inited && d >= gpus && d < gpus + n_gpus;
}

static int get(nvmlDevice_t d, enum key k, unsigned long long *out)
{
	if (!dev_ok(d))
		return inited ? ERR_INVALID_ARGUMENT : ERR_UNINITIALIZED;
	if (!d->set[k])
		return ERR_NOT_SUPPORTED;
	*out = d->v[k];
	return OK;
}

int nvmlInit_v2(void)
{
	seen_size = -1;
	load();
	if (init_code)
		return init_code;
	inited = 1;
	return OK;
}

int nvmlShutdown(void)
{
	inited = 0;
	return OK;
}

const char *nvmlErrorString(int rc)
{
	switch (rc) {
	case OK: return "Success";
	case ERR_UNINITIALIZED: return "Uninitialized";
	case ERR_INVALID_ARGUMENT: return "Invalid Argument";
	case ERR_NOT_SUPPORTED: return "Not Supported";
	case 9: return "Driver Not Loaded";
	case ERR_TIMEOUT: return "Timeout";
	}
	return "Unknown Error";
}

int nvmlDeviceGetCount_v2(unsigned *count)
{
	load();
	if (!inited)
		return ERR_UNINITIALIZED;
	*count = n_gpus;
	return OK;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d)
{
	load();
	if (!inited)
		return ERR_UNINITIALIZED;
	if (i >= n_gpus)
		return ERR_INVALID_ARGUMENT;
	*d = &gpus[i];
	return OK;
}

int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	unsigned long long v;
	int rc = get(d, UTIL, &v);

	if (rc == OK) {
		u->gpu = (unsigned)v;
		u->memory = 0;
	}
	return rc;
}

int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	unsigned long long used, total;
	int rc = get(d, MEM_USED, &used);

	if (rc == OK)
		rc = get(d, MEM_TOTAL, &total);
	if (rc == OK) {
		m->used = used;
		m->total = total;
		m->free = total > used ? total - used : 0;
	}
	return rc;
}

int nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *t)
{
	unsigned long long v;
	int rc;

	if (sensor != 0) /* NVML_TEMPERATURE_GPU */
		return ERR_INVALID_ARGUMENT;
	rc = get(d, TEMP, &v);
	if (rc == OK)
		*t = (unsigned)v;
	return rc;
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *mw)
{
	unsigned long long v;
	int rc = get(d, POWER, &v);

	if (rc == OK)
		*mw = (unsigned)v;
	return rc;
}

int nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *mhz)
{
	unsigned long long v;
	int rc;

	if (type != 1) /* NVML_CLOCK_SM */
		return ERR_INVALID_ARGUMENT;
	rc = get(d, SM, &v);
	if (rc == OK)
		*mhz = (unsigned)v;
	return rc;
}

int nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter,
				unsigned long long *n)
{
	if (counter != 0 || (type != 0 && type != 1)) /* VOLATILE; CORRECTED, UNCORRECTED */
		return ERR_INVALID_ARGUMENT;
	return get(d, type == 0 ? ECC_C : ECC_U, n);
}

int nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
					      unsigned long long *r)
{
	return get(d, THROTTLE, r);
}

int nvmlEventSetCreate(nvmlEventSet_t *set)
{
	static struct fake_set one;

	if (!inited)
		return ERR_UNINITIALIZED;
	*set = &one;
	return OK;
}

int nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types,
			     nvmlEventSet_t set)
{
	if (!dev_ok(d) || !set || types != 0x8ULL) /* Xid critical errors */
		return ERR_INVALID_ARGUMENT;
	registered[d - gpus] = 1;
	return OK;
}

int nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *ev,
			unsigned timeout_ms)
{
	if (!set || !inited)
		return ERR_INVALID_ARGUMENT;
	if (timeout_ms != 0) /* herd never waits on its loop */
		return ERR_INVALID_ARGUMENT;
	load();
	for (unsigned i = 0; i < n_gpus; i++) {
		struct fake_gpu *g = &gpus[i];

		if (!registered[i] || !g->set[XID] ||
		    (g->xid_any_sent && g->xid_sent == g->v[XID]))
			continue;
		g->xid_sent = g->v[XID];
		g->xid_any_sent = 1;
		memset(ev, 0, sizeof(*ev));
		ev->device = g;
		ev->eventType = 0x8ULL;
		ev->eventData = g->v[XID];
		return OK;
	}
	return ERR_TIMEOUT;
}

int nvmlEventSetFree(nvmlEventSet_t set)
{
	(void)set;
	return OK;
}

/* The health gate (agent/nvml.c gpu_check). */
int nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending);
int nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending)
{
	unsigned long long v;
	int rc = get(d, RETIRED, &v);

	if (rc == OK)
		*pending = v != 0;
	return rc;
}
