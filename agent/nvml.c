/* nvml.c — the node's GPUs through NVML, loaded at run time.
 *
 * NVML is dlopen()ed once at agent start ("libnvidia-ml.so.1"): herd has
 * no build dependency on it, and a node without it says why (gpu_error)
 * in every METRICS and in the health gate's "gpus" check.  NVML's calls
 * are declared here by hand with NVML's documented ABI; tests/fakenvml
 * implements exactly these (the two files change together).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/check.h"
#include "agent/measure.h"

/* ---- NVML, loaded at run time ----------------------------------------------
 */

/* NVML's ABI (nvml.h), as much as herd uses. */
typedef int nvml_ret;
typedef struct nvml_device *nvml_device;
typedef struct nvml_event_set *nvml_event_set;
struct nvml_utilization {
	unsigned gpu, memory;
};
struct nvml_memory {
	unsigned long long total, free, used;
};
struct nvml_event_data {
	nvml_device device;
	unsigned long long event_type, event_data;
	unsigned gpu_instance_id, compute_instance_id;
};
#define NVML_SUCCESS		      0
#define NVML_TEMPERATURE_GPU	      0
#define NVML_CLOCK_SM		      1
#define NVML_MEMORY_ERROR_CORRECTED   0
#define NVML_MEMORY_ERROR_UNCORRECTED 1
#define NVML_VOLATILE_ECC	      0
#define NVML_EVENT_XID		      0x8ULL

struct gpu {
	void *lib;
	char why[256]; /* "" when NVML works */
	unsigned n;
	nvml_device dev[PROTO_METRICS_DEVS_MAX];
	long long xid[PROTO_METRICS_DEVS_MAX]; /* -1: none seen */
	nvml_event_set events;		       /* NULL: no Xid events */

	nvml_ret (*init)(void);
	nvml_ret (*shutdown)(void);
	const char *(*error_string)(nvml_ret);
	nvml_ret (*count)(unsigned *);
	nvml_ret (*handle)(unsigned, nvml_device *);
	nvml_ret (*utilization)(nvml_device, struct nvml_utilization *);
	nvml_ret (*memory)(nvml_device, struct nvml_memory *);
	nvml_ret (*temperature)(nvml_device, int, unsigned *);
	nvml_ret (*power)(nvml_device, unsigned *);
	nvml_ret (*clock)(nvml_device, int, unsigned *);
	nvml_ret (*ecc)(nvml_device, int, int, unsigned long long *);
	nvml_ret (*throttle)(nvml_device, unsigned long long *);
	nvml_ret (*event_set_create)(nvml_event_set *);
	nvml_ret (*register_events)(nvml_device, unsigned long long,
				    nvml_event_set);
	nvml_ret (*event_wait)(nvml_event_set, struct nvml_event_data *,
			       unsigned);
	nvml_ret (*event_set_free)(nvml_event_set);
	nvml_ret (*retired_pending)(nvml_device, int *); /* the gate */
};

static const char *nvml_why(struct gpu *g, nvml_ret rc)
{
	const char *s = g->error_string ? g->error_string(rc) : NULL;

	return s ? s : "unknown error";
}

struct gpu *gpu_open(const char *lib)
{
	struct gpu *g = calloc(1, sizeof(*g));
	unsigned n = 0;
	nvml_ret rc;

	if (!g)
		return NULL;
	g->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!g->lib) {
		const char *e = dlerror();

		snprintf(g->why, sizeof(g->why), "no NVML (%s)", e ? e : lib);
		return g;
	}
#define SYM(field, name) (*(void **)&g->field = dlsym(g->lib, name))
	SYM(init, "nvmlInit_v2");
	SYM(shutdown, "nvmlShutdown");
	SYM(error_string, "nvmlErrorString");
	SYM(count, "nvmlDeviceGetCount_v2");
	SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
	SYM(utilization, "nvmlDeviceGetUtilizationRates");
	SYM(memory, "nvmlDeviceGetMemoryInfo");
	SYM(temperature, "nvmlDeviceGetTemperature");
	SYM(power, "nvmlDeviceGetPowerUsage");
	SYM(clock, "nvmlDeviceGetClockInfo");
	SYM(ecc, "nvmlDeviceGetTotalEccErrors");
	SYM(throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
	SYM(event_set_create, "nvmlEventSetCreate");
	SYM(register_events, "nvmlDeviceRegisterEvents");
	SYM(event_wait, "nvmlEventSetWait_v2");
	SYM(event_set_free, "nvmlEventSetFree");
	SYM(retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
#undef SYM
	if (!g->init || !g->shutdown || !g->count || !g->handle) {
		snprintf(g->why, sizeof(g->why),
			 "no NVML (%s lacks nvmlInit_v2, nvmlShutdown, "
			 "nvmlDeviceGetCount_v2 or "
			 "nvmlDeviceGetHandleByIndex_v2)",
			 lib);
		goto fail;
	}
	rc = g->init();
	if (rc != NVML_SUCCESS) {
		snprintf(g->why, sizeof(g->why), "no NVML (nvmlInit: %s)",
			 nvml_why(g, rc));
		goto fail;
	}
	rc = g->count(&n);
	if (rc != NVML_SUCCESS) {
		snprintf(g->why, sizeof(g->why), "NVML: nvmlDeviceGetCount: %s",
			 nvml_why(g, rc));
		g->shutdown();
		goto fail;
	}
	if (n > PROTO_METRICS_DEVS_MAX)
		n = PROTO_METRICS_DEVS_MAX;
	for (unsigned i = 0; i < n; i++) {
		g->xid[g->n] = -1;
		if (g->handle(i, &g->dev[g->n]) == NVML_SUCCESS)
			g->n++;
	}
	/* Xid events: registered once; a GPU that cannot report them
	 * (NOT_SUPPORTED) simply never has one. */
	if (g->event_set_create && g->register_events && g->event_wait &&
	    g->event_set_create(&g->events) == NVML_SUCCESS) {
		for (unsigned i = 0; i < g->n; i++)
			g->register_events(g->dev[i], NVML_EVENT_XID,
					   g->events);
	} else {
		g->events = NULL;
	}
	return g;
fail:
	dlclose(g->lib);
	g->lib = NULL;
	return g;
}

const char *gpu_error(const struct gpu *g)
{
	if (!g)
		return "no NVML (out of memory)";
	return g->why[0] ? g->why : NULL;
}

/* Takes the Xid events that are waiting (never blocks: timeout 0). */
static void gpu_events(struct gpu *g)
{
	struct nvml_event_data ev;

	/* 64: more than one sample's worth; the rest waits. */
	for (int k = 0; g->events && k < 64; k++) {
		memset(&ev, 0, sizeof(ev));
		if (g->event_wait(g->events, &ev, 0) != NVML_SUCCESS)
			break;
		if (ev.event_type != NVML_EVENT_XID)
			continue;
		for (unsigned i = 0; i < g->n; i++)
			if (g->dev[i] == ev.device)
				g->xid[i] =
				    (long long)(ev.event_data & 0x7fffffffULL);
	}
}

void gpu_sample(struct gpu *g, json_t *arr)
{
	if (!g || g->why[0])
		return;
	gpu_events(g);
	for (unsigned i = 0; i < g->n; i++) {
		nvml_device d = g->dev[i];
		json_t *o = json_pack("{s:i}", "index", (int)i);
		struct nvml_utilization u;
		struct nvml_memory m;
		unsigned v;
		unsigned long long ull;

#define PUT(key, val)                                                          \
	json_object_set_new(o, key, json_integer((json_int_t)(val)))
		if (g->utilization && g->utilization(d, &u) == NVML_SUCCESS)
			PUT("util_pct", u.gpu > 100 ? 100 : u.gpu);
		if (g->memory && g->memory(d, &m) == NVML_SUCCESS) {
			PUT("mem_used", m.used & (~0ULL >> 1));
			PUT("mem_total", m.total & (~0ULL >> 1));
		}
		if (g->temperature &&
		    g->temperature(d, NVML_TEMPERATURE_GPU, &v) ==
			NVML_SUCCESS &&
		    v <= 10000)
			PUT("temp_c", v);
		if (g->power && g->power(d, &v) == NVML_SUCCESS)
			PUT("power_mw", v);
		if (g->clock && g->clock(d, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
			PUT("sm_mhz", v);
		if (g->ecc && g->ecc(d, NVML_MEMORY_ERROR_CORRECTED,
				     NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
			PUT("ecc_corrected", ull & (~0ULL >> 1));
		if (g->ecc && g->ecc(d, NVML_MEMORY_ERROR_UNCORRECTED,
				     NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
			PUT("ecc_uncorrected", ull & (~0ULL >> 1));
		if (g->throttle && g->throttle(d, &ull) == NVML_SUCCESS)
			PUT("throttle", ull & (~0ULL >> 1));
		if (g->xid[i] >= 0)
			PUT("xid", g->xid[i]);
#undef PUT
		json_array_append_new(arr, o);
	}
}

json_t *gpu_check(struct gpu *g, int expected)
{
	char why[512] = "", value[64];
	size_t len = 0;

	if (!g || g->why[0]) {
		const char *e = gpu_error(g);

		if (expected <= 0)
			return check_entry("gpus", "skipped", e, NULL);
		snprintf(why, sizeof(why), "%d GPUs expected, but %s", expected,
			 e);
		return check_entry("gpus", "fail", why, NULL);
	}
	if (expected > 0 && (int)g->n < expected)
		len += (size_t)snprintf(why, sizeof(why),
					"%u GPUs visible, %d expected", g->n,
					expected);
	for (unsigned i = 0; i < g->n && len < sizeof(why) - 80; i++) {
		unsigned long long ull = 0;
		int pending = 0;

		if (g->ecc &&
		    g->ecc(g->dev[i], NVML_MEMORY_ERROR_UNCORRECTED,
			   NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS &&
		    ull > 0)
			len += (size_t)snprintf(
			    why + len, sizeof(why) - len,
			    "%sGPU %u: %llu uncorrectable ECC errors",
			    len ? "; " : "", i, ull);
		if (g->retired_pending &&
		    g->retired_pending(g->dev[i], &pending) == NVML_SUCCESS &&
		    pending)
			len += (size_t)snprintf(
			    why + len, sizeof(why) - len,
			    "%sGPU %u: retired pages pending (reset it)",
			    len ? "; " : "", i);
	}
	snprintf(value, sizeof(value), "%u GPUs", g->n);
	if (why[0])
		return check_entry("gpus", "fail", why, value);
	if (g->n == 0 && expected <= 0)
		return check_entry("gpus", "skipped", "no GPUs", value);
	return check_entry("gpus", "ok", NULL, value);
}

void gpu_close(struct gpu *g)
{
	if (!g)
		return;
	if (g->lib) {
		if (g->events && g->event_set_free)
			g->event_set_free(g->events);
		g->shutdown();
		dlclose(g->lib);
	}
	free(g);
}
