# herd — plain Makefile.  `make` builds bin/herd, bin/herd-agent and
# lib/libherd.a; `make check` installs what is missing, rebuilds with
# sanitizers and runs every test tier; `make demo` runs a job on a local
# cluster.  See README.md.

CC       ?= cc
FUZZ_CC  ?= clang
SANITIZE ?=
PKGS     := yaml-0.1 libssh libcurl jansson hwloc pmix libmicrohttpd
BUILD    := build

WARN     := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wformat=2 \
            -Wno-format-nonliteral
CFLAGS   ?= -O2 -g
HARDEN   := -D_FORTIFY_SOURCE=2 -fstack-protector-strong
PKG_CONFIG ?= pkg-config
# `make deps` is what installs the .pc files, so pkg-config must not run
# when this Makefile is parsed (a first `make demo` on a fresh machine
# would link without -ljansson ...).  These expand on first use, inside a
# recipe, and are then kept; the targets that run deps (check, demo) build
# in a sub-make that starts after deps has finished.
pkg = $(shell $(PKG_CONFIG) $(1) $(PKGS) || echo PKG_MISSING)
pkg_checked = $(if $(filter PKG_MISSING,$(1)),$(error $(PKG_CONFIG) cannot find all of $(PKGS): run 'make deps' (as root)),$(1))
PKG_CFLAGS = $(eval PKG_CFLAGS := $$(call pkg_checked,$$(call pkg,--cflags)))$(PKG_CFLAGS)
PKG_LIBS   = $(eval PKG_LIBS := $$(call pkg_checked,$$(call pkg,--libs)) -lslurm -lcrypto -lm)$(PKG_LIBS)
ALL_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(WARN) $(HARDEN) $(CFLAGS) -Iinclude -I. -MMD -MP \
             $(PKG_CFLAGS) $(SAN_FLAGS)
ALL_LDFLAGS = $(LDFLAGS) $(SAN_LDFLAGS)
ifneq ($(SANITIZE),)
SAN_FLAGS   := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_LDFLAGS := -fsanitize=$(SANITIZE)
endif

LIB_SRC      := $(sort $(wildcard lib/*/*.c))
LAUNCHER_SRC := $(sort $(wildcard launcher/*.c launcher/*/*.c launcher/*/*/*.c))
AGENT_SRC    := $(sort $(wildcard agent/*.c agent/*/*.c)) keeper/run.c keeper/warm.c
UNIT_SRC     := $(sort $(wildcard tests/unit/test_*.c))
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))

LIB_OBJ      := $(LIB_SRC:%.c=$(BUILD)/%.o)
LAUNCHER_OBJ := $(LAUNCHER_SRC:%.c=$(BUILD)/%.o)
AGENT_OBJ    := $(AGENT_SRC:%.c=$(BUILD)/%.o) $(BUILD)/agent/pypkg_image.o
UNIT_BIN     := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit/%)
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)

FUZZ_SECONDS ?= 30
CHECK_FUZZ_SECONDS ?= 10

.PHONY: all deps check unit integration fuzz-smoke fuzz demo bench clean format examples
all: bin/herd bin/herd-agent lib/libherd.a

# Objects are rebuilt whenever the compiler flags change (a sanitizer
# build must never link with plain objects).
FLAGS_STAMP := $(BUILD)/.flags
$(FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS)' | cmp -s - $@ || echo '$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS)' > $@
FORCE:

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

lib/libherd.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

bin/herd: $(LAUNCHER_OBJ) lib/libherd.a
	@mkdir -p bin
	$(CC) $(ALL_LDFLAGS) -o $@ $(LAUNCHER_OBJ) lib/libherd.a $(PKG_LIBS)

# The agent is uploaded to every node and hashed there before every start
# (sha256sum of 650 KB: 6.8 ms of the node's CPU; 200 KB: 3.4 ms), so a
# plain build keeps its debug information and symbol table beside it, in
# bin/herd-agent.debug (gdb finds it through the debuglink).  Sanitizer
# builds keep them inside, for their reports.
# --as-needed (gcc's default, but not with -fsanitize): the agent loads
# only what it calls (libpmix is dlopen()ed, agent/pmix/server.c), in sanitizer
# builds too.  pmix_server_fence is exported: libpmix's fence handler,
# which the agent's own comes before (agent/pmix/fence_hold.c).
bin/herd-agent: $(AGENT_OBJ) lib/libherd.a
	@mkdir -p bin
	$(CC) $(ALL_LDFLAGS) -Wl,--as-needed -Wl,--export-dynamic-symbol=pmix_server_fence -o $@ $(AGENT_OBJ) lib/libherd.a $(PKG_LIBS)
ifeq ($(SANITIZE),)
	objcopy --only-keep-debug $@ $@.debug
	objcopy --strip-all --add-gnu-debuglink=$@.debug $@
endif

# The rank keeper (agent/keeper.c): a program of its own, linked with libc
# alone (an exec of it costs a node about a quarter of an exec of the
# agent, which loads libcrypto, libpmix, hwloc...), embedded in the agent
# (agent/keeper_image.c) and run from a memfd for every rank.
KEEPER_BIN := $(BUILD)/herd-keeper
KEEPER_OBJ := $(BUILD)/keeper/main.o $(BUILD)/keeper/run.o $(BUILD)/keeper/warm.o
$(KEEPER_BIN): $(KEEPER_OBJ) lib/libherd.a
	$(CC) $(ALL_LDFLAGS) -o $@ $(KEEPER_OBJ) lib/libherd.a
ifeq ($(SANITIZE),)
	objcopy --strip-all $@
endif
$(BUILD)/agent/keeper_image.o: agent/keeper_image.c $(KEEPER_BIN) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DKEEPER_IMAGE='"$(KEEPER_BIN)"' -c $< -o $@
# The warm interpreter's bootstrap (agent/warm.c), embedded the same way.
$(BUILD)/agent/warm_boot.o: agent/warm_boot.c agent/warm_boot.py $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DWARM_BOOT='"agent/warm_boot.py"' -c $< -o $@

# The herd Python package (python/herd/*.py: every file there at build
# time) inside the agent too (agent/pypkg.c writes it out on each node).
# The list of files is a stamp of its own, so a file added or removed
# regenerates the table.
PYPKG_FILES := $(sort $(wildcard python/herd/*.py))
PYPKG_LIST  := $(BUILD)/pypkg.list
PYPKG_C     := $(BUILD)/agent/pypkg_image.c
$(PYPKG_LIST): FORCE
	@mkdir -p $(BUILD)
	@echo '$(PYPKG_FILES)' | cmp -s - $@ || echo '$(PYPKG_FILES)' > $@
$(PYPKG_C): scripts/pypkg-image.sh $(PYPKG_LIST)
	@mkdir -p $(dir $@)
	sh scripts/pypkg-image.sh $@ $(PYPKG_FILES)
$(BUILD)/agent/pypkg_image.o: $(PYPKG_C) agent/pypkg.h $(PYPKG_FILES) $(FLAGS_STAMP)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/unit/%: tests/unit/%.c lib/libherd.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< lib/libherd.a $(PKG_LIBS) -lcmocka

# The controller's unit test links the launcher's objects (all but main).
LAUNCHER_A := $(BUILD)/launcher.a
$(LAUNCHER_A): $(filter-out $(BUILD)/launcher/main.o,$(LAUNCHER_OBJ))
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/unit/test_ctl: tests/unit/test_ctl.c $(LAUNCHER_A) lib/libherd.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LAUNCHER_A) lib/libherd.a $(PKG_LIBS) -lcmocka

# The controller's metrics table (launcher/model/metric_table.c) and the remote
# commands of the node cache (launcher/transport/ssh/nodecache.c) are tested from the
# launcher's objects too; so are the project templates (launcher/gen/initproj.c).
$(BUILD)/unit/test_ctl_metrics $(BUILD)/unit/test_nodecache $(BUILD)/unit/test_straggler $(BUILD)/unit/test_initproj: $(BUILD)/unit/%: tests/unit/%.c $(LAUNCHER_A) lib/libherd.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LAUNCHER_A) lib/libherd.a $(PKG_LIBS) -lcmocka

# The agent's tests link the agent's own objects but main.o, and the
# recorder of frames sent (tests/unit/agent_stub.c: their agent_send).
AGENT_STUB_OBJ := $(BUILD)/tests/unit/agent_stub.o
AGENT_TEST_OBJ := $(filter-out $(BUILD)/agent/main.o,$(AGENT_OBJ)) $(AGENT_STUB_OBJ)
$(BUILD)/unit/test_agent $(BUILD)/unit/test_metrics $(BUILD)/unit/test_check $(BUILD)/unit/test_warm: $(BUILD)/unit/%: tests/unit/%.c $(AGENT_TEST_OBJ) lib/libherd.a $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(AGENT_TEST_OBJ) lib/libherd.a $(PKG_LIBS) -lcmocka

# The shared objects the tests load into herd and the agent: plain
# flags, never sanitized (a sanitizer runtime must be the first DSO).
TEST_SO_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -fPIC -shared

# The fake NVML the tests put on LD_LIBRARY_PATH (tests/fakenvml), which
# the agent dlopen()s.
FAKE_NVML := $(BUILD)/tests/libnvidia-ml.so.1
$(FAKE_NVML): tests/fakenvml/fake_nvml.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_SO_CFLAGS) -Wl,-soname,libnvidia-ml.so.1 -o $@ $<

# A pthread_timedjoin_np() that always times out, which t0516 preloads
# into herd (tests/shim/latejoin.c).
LATEJOIN := $(BUILD)/tests/latejoin.so
$(LATEJOIN): tests/shim/latejoin.c
	@mkdir -p $(dir $@)
	$(CC) $(TEST_SO_CFLAGS) -o $@ $<

# libFuzzer targets: built with clang, ASan+UBSan, from the library
# sources, which are compiled once for all of them (fuzzer-no-link: the
# coverage instrumentation without libFuzzer's main).  HOSTLIST_MAX is
# lower here: under ASan libslurm's hostlist grows its arrays by copying,
# and a few bytes such as "n[1-4343]x[1-44]y[5,0]" (380,000 hosts, a
# Slurm range each) take longer than the fuzzer's 10 s hang limit.
FUZZ_FLAGS   := -std=gnu11 -D_GNU_SOURCE -g -O1 -Iinclude -fno-sanitize-recover=all \
		-DHOSTLIST_MAX=20000
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/fuzzlib/%.o)
$(BUILD)/fuzzlib/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(PKG_CFLAGS) \
	  -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
.SECONDARY: $(FUZZ_LIB_OBJ)
$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(PKG_CFLAGS) \
	  -fsanitize=fuzzer,address,undefined \
	  -o $@ $< $(FUZZ_LIB_OBJ) $(PKG_LIBS)

# Example programs the tests and the demo run (Open MPI's mpicc).
examples: $(BUILD)/examples/allreduce
$(BUILD)/examples/allreduce: examples/mpi-allreduce/allreduce.c
	@mkdir -p $(dir $@)
	mpicc -O2 -Wall -o $@ $<

# The installer; a test replaces it (and PKG_CONFIG) to prove that the
# first run on a machine without the packages builds.
DEPS     ?= scripts/deps.sh
DEMO_RUN ?= examples/demo.sh

deps:
	@$(DEPS)

unit: $(UNIT_BIN) $(FAKE_NVML)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

# The scripts run side by side (prove -j): each makes its own cluster,
# namespaces and Slurm with unique names, and most of their time is spent
# waiting on the processes they start.  The longest start first, so that
# none of them is the last to begin.  Each script runs verbose (sharness
# -v) into build/itest/NAME.log (tests/integration/run-one); the logs of
# the scripts that failed are printed at the end.  Sanitizer reports go
# to build/sanitizer too and are printed at the end.
# Most of a script's time is spent waiting (for ranks, heartbeats,
# timeouts), so 6 run at once on 2 cores; the ones that took longest in
# the last measured run come first (slowest first, in this order).
INTEG_JOBS ?= 6
INTEG_ALL  := $(sort $(wildcard tests/integration/t*.t))
INTEG_SLOW := $(foreach t,t0671 t0736 t0820 t0750 t0027 t0670 t0026 \
		t0630 t0650 t0730 t0620 t0300 t0571 t0525 t0800 t0810 t0010 \
		t0585 t0565 t0660 t0555 t0580 t0538 t0596 t0710, \
		$(filter tests/integration/$(t)-%,$(INTEG_ALL)))
INTEG      := $(INTEG_SLOW) $(filter-out $(INTEG_SLOW),$(INTEG_ALL))
# ITEST_OUT: where the logs and sanitizer reports go (a run of a few
# scripts beside a whole `make check` gives another: each run empties
# its own).
ITEST_OUT ?= $(BUILD)
integration: all examples $(FAKE_NVML) $(LATEJOIN)
	@rm -rf $(ITEST_OUT)/sanitizer $(ITEST_OUT)/itest && mkdir -p $(ITEST_OUT)/sanitizer $(ITEST_OUT)/itest
	@HERD_SANITIZER_LOG=$(abspath $(ITEST_OUT)/sanitizer) \
	HERD_ITEST_LOGS=$(abspath $(ITEST_OUT)/itest) \
		prove -j$(INTEG_JOBS) --timer --exec tests/integration/run-one \
		$(INTEG); rc=$$?; \
	for f in $(ITEST_OUT)/itest/*.failed; do \
		[ -e "$$f" ] || continue; \
		echo "== failed: $${f%.failed}.log"; cat "$${f%.failed}.log"; rc=1; \
	done; \
	for f in $(ITEST_OUT)/sanitizer/*; do \
		[ -e "$$f" ] || continue; \
		echo "== sanitizer report $$f"; cat "$$f"; rc=1; \
	done; \
	cat $(ITEST_OUT)/itest/*.cpu 2>/dev/null | sort -k2 -rn | awk \
	  '{ t += $$2; if (NR <= 10) top = top sprintf("  %s %.0f s\n", $$1, $$2) } \
	   END { if (NR) printf "CPU of the scripts: %.0f s in all; the most:\n%s", t, top }'; \
	exit $$rc

fuzz-smoke: $(FUZZ_BIN)
	@tests/fuzz/run -j $(JOBS) $(FUZZ_SECONDS) $(FUZZ_BIN)

fuzz:
	@$(MAKE) --no-print-directory fuzz-smoke FUZZ_SECONDS=300

# Builds run on every core; the fuzz smoke test gives each target
# FUZZ_SECONDS (10 s here, 300 s in `make fuzz`).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
check:
	@$(DEPS)
	@$(MAKE) --no-print-directory -j$(JOBS) SANITIZE=address,undefined all unit
	@$(MAKE) --no-print-directory -j$(JOBS) SANITIZE=address,undefined integration
	@$(MAKE) --no-print-directory -j$(JOBS) fuzz-smoke FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)

demo:
	@$(DEPS)
	@$(MAKE) --no-print-directory all
	@$(DEMO_RUN)

bench: all
	@bench/run

format:
	clang-format -i $(LIB_SRC) $(LAUNCHER_SRC) $(AGENT_SRC) include/herd/*.h

clean:
	rm -rf $(BUILD) bin lib/libherd.a

include scripts/install.mk

-include $(FUZZ_LIB_OBJ:.o=.d) $(LIB_OBJ:.o=.d) $(LAUNCHER_OBJ:.o=.d) $(AGENT_OBJ:.o=.d) \
	 $(AGENT_STUB_OBJ:.o=.d)
