# install.mk — man pages, bash completion, `make install`, `make
# uninstall` and `make deb`; included by the Makefile.
#
# The installed layout (PREFIX, default /usr/local; DESTDIR for staging):
#   bin/herd, bin/herd-agent
#   share/herd/templates/           herd render / herd init find it from
#                                   bin/herd: ../share/herd/templates
#   share/herd/python/herd/         the package the ranks import
#   share/man/man1/herd*.1, share/man/man5/herd.yaml.5
#   share/bash-completion/completions/herd
# herd finds herd-agent beside itself and its templates relative to
# itself (/proc/self/exe), so an installed herd needs no source tree.

PREFIX      ?= /usr/local
DESTDIR     ?=
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
INSTALL     ?= install

HERD_VERSION := $(shell sed -n 's/^\#define HERD_VERSION "\(.*\)"/\1/p' include/herd/version.h)

# The pages and the completion are made from the --help texts of the
# built programs, the spec schema (lib/job/spec*.c) and the key table of
# doc/keys.md: they are remade whenever one of those changes, so they
# never drift.
MAN_DIR     := $(BUILD)/man
COMPLETION  := $(BUILD)/completion/herd
MAN_STAMP   := $(MAN_DIR)/.stamp
MKMAN       := scripts/mkman.py
MKMAN_ARGS   = --herd bin/herd --agent bin/herd-agent --spec-dir lib/job \
               --keys doc/keys.md --out $(MAN_DIR) --completion $(COMPLETION)

.PHONY: man man-check install uninstall deb
man: $(MAN_STAMP)
$(MAN_STAMP): bin/herd bin/herd-agent $(MKMAN) doc/keys.md $(wildcard lib/job/spec*.c)
	@mkdir -p $(MAN_DIR)
	rm -f $(MAN_DIR)/*.1 $(MAN_DIR)/*.5
	python3 $(MKMAN) --strict $(MKMAN_ARGS)
	@touch $@
$(COMPLETION): $(MAN_STAMP)

# Every page lints clean (mandoc -T lint, warnings and worse).
man-check: $(MAN_STAMP)
	mandoc -T lint -W warning $(MAN_DIR)/*.1 $(MAN_DIR)/*.5

PY_SRC := $(sort $(wildcard python/herd/*.py))
TEMPLATE_FILES := $(shell find templates -type f ! -name '*~' 2>/dev/null | LC_ALL=C sort)

# DESTDIR and PREFIX may hold blanks: every path is quoted.
D := "$(DESTDIR)$(PREFIX)"
install: all $(MAN_STAMP)
	$(INSTALL) -d $(D)/bin $(D)/share/herd/templates $(D)/share/herd/python/herd \
	  $(D)/share/man/man1 $(D)/share/man/man5 \
	  "$(DESTDIR)$(BASHCOMPDIR)"
	$(INSTALL) -m 0755 bin/herd bin/herd-agent $(D)/bin/
	@set -e; for f in $(TEMPLATE_FILES); do \
	  d=$(D)/share/herd/$$(dirname $$f); \
	  $(INSTALL) -d "$$d"; \
	  echo "$(INSTALL) -m 0644 $$f $$d/"; $(INSTALL) -m 0644 $$f "$$d/"; \
	done
	$(if $(PY_SRC),$(INSTALL) -m 0644 $(PY_SRC) $(D)/share/herd/python/herd/)
	$(INSTALL) -m 0644 $(MAN_DIR)/*.1 $(D)/share/man/man1/
	$(INSTALL) -m 0644 $(MAN_DIR)/*.5 $(D)/share/man/man5/
	$(INSTALL) -m 0644 $(COMPLETION) "$(DESTDIR)$(BASHCOMPDIR)/herd"

# Removes what install wrote: share/herd is herd's own directory; the
# pages are herd.1, herd-*.1 and herd.yaml.5.
uninstall:
	rm -f $(D)/bin/herd $(D)/bin/herd-agent
	rm -rf $(D)/share/herd
	rm -f $(D)/share/man/man1/herd.1 $(D)/share/man/man1/herd-*.1 \
	  $(D)/share/man/man5/herd.yaml.5 "$(DESTDIR)$(BASHCOMPDIR)/herd"

# The Debian package (debian/, debhelper), built with dpkg-buildpackage
# in a copy of the tree under build/deb, so that it never sees this
# tree's objects (sanitizer builds) and writes nothing beside it.  The
# .deb and lintian's report end up in build/deb/.
DEB_DIR := $(BUILD)/deb
DEB_SRC := $(DEB_DIR)/herd-$(HERD_VERSION)
DEB_FILES = $(shell if [ -d .git ] || [ -f .git ]; then \
	  git ls-files --cached --others --exclude-standard; \
	else find . -path ./$(BUILD) -prune -o -path ./bin -prune -o \
	  -type f ! -name '*.o' -print; fi)
deb:
	@[ "$$(dpkg-parsechangelog -l debian/changelog -S Version)" = "$(HERD_VERSION)" ] || \
	  { echo "deb: debian/changelog's version is not $(HERD_VERSION) (include/herd/version.h)" >&2; exit 1; }
	rm -rf $(DEB_DIR)
	@mkdir -p $(DEB_SRC)
	@for f in $(DEB_FILES); do \
	  [ -f "$$f" ] && cp --parents -p "$$f" $(DEB_SRC)/ || true; done
	cd $(DEB_SRC) && DEB_BUILD_OPTIONS="$${DEB_BUILD_OPTIONS:-parallel=$(JOBS)}" \
	  dpkg-buildpackage -us -uc -b
	cd $(DEB_DIR) && lintian --tag-display-limit 0 herd_$(HERD_VERSION)_*.changes \
	  > lintian.txt 2>&1 || true; cat lintian.txt; \
	  ! grep -q '^E:' lintian.txt
	@ls $(DEB_DIR)/*.deb
