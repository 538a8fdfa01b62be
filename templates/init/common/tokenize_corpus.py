#!/usr/bin/python3
"""tokenize_corpus.py: text files -> token shards for train.py (SentencePiece,
Debian's python3-sentencepiece).

    tokenize_corpus.py --corpus PATH... --out DIR (--vocab-size N | --tokenizer M)

--corpus takes files, directories (searched recursively) and glob
patterns ('/usr/lib/python3.11/*.py', quoted: expanded here, on the
node); bytes that are not UTF-8 are read as replacement characters.  The files are
sorted by path: file i becomes DIR/shard_NNNNN.bin (i, 5 digits), its
tokens one after another as little-endian uint16 when the vocabulary has
at most 65535 pieces, else uint32; every line of text is encoded and
followed by the end-of-sentence id (it stands for the newline).

--vocab-size N trains a SentencePiece model (unigram) on the corpus and
saves it as DIR/tokenizer.model; --tokenizer MODEL uses a given model
(copied to DIR/tokenizer.model; fine-tuning data must use the base
model's tokenizer).

Idempotent: a shard is complete only when its marker DIR/shard_NNNNN.json
exists (written after the .bin, both atomically by rename); complete
shards of the same source are skipped, and the tokenizer is not trained
again when DIR/tokenizer.model exists.  DIR/index.json (written last, by
one process) lists the shards: {"dtype", "vocab_size", "tokens",
"tokenizer", "shards": [{"file", "tokens", "source"}]}.

Parallel: started by herd (or torchrun) with RANK and WORLD_SIZE, rank r
encodes the files i with i % WORLD_SIZE == r; rank 0 trains the tokenizer
first (the others wait until DIR/tokenizer.model appears: it is renamed
into place whole) and writes index.json once every shard is complete.
Started by hand, --workers processes (default: the CPUs) share the files.
DIR must be on a file system every node sees.
"""
import os
import sys

# This file's name is also the standard library's tokenize module, which
# linecache (tracebacks) and torch import: a Python started in this
# directory, or running a script from it, would find this file first.
# Imported as "tokenize", it hands over to the standard library's module;
# run as a script, it takes its directory off the path.
_HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "tokenize":
    _path = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    try:
        del sys.modules["tokenize"]
        import tokenize as _std  # the standard library's
    finally:
        sys.path[:] = _path
    sys.modules["tokenize"] = _std  # what the import statement returns
else:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

MODEL = "tokenizer.model"


def parse(argv=None):
    p = argparse.ArgumentParser(
        description="Encode text files into token shards for train.py "
        "(SentencePiece).")
    p.add_argument("--corpus", nargs="+", required=True, metavar="PATH",
                   help="text files, directories or glob patterns")
    p.add_argument("--out", required=True, metavar="DIR")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--vocab-size", type=int, metavar="N",
                   help="train a tokenizer of N pieces on the corpus")
    g.add_argument("--tokenizer", metavar="MODEL",
                   help="use this SentencePiece model")
    p.add_argument("--workers", type=int, default=0,
                   help="local processes when not started by herd "
                   "(default: the CPUs)")
    p.add_argument("--max-sentences", type=int, default=1_000_000,
                   help="lines sampled to train the tokenizer")
    p.add_argument("--wait", type=float, default=3600,
                   help="seconds a rank waits for rank 0's tokenizer and "
                   "for the other ranks' shards")
    a = p.parse_args(argv)
    if a.vocab_size is not None and not 8 <= a.vocab_size <= 1 << 31:
        p.error("--vocab-size must be at least 8")
    return a


def corpus_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for d, dirs, names in os.walk(p):
                dirs.sort()
                files += [os.path.join(d, n) for n in names
                          if not n.startswith(".")]
        elif os.path.isfile(p):
            files.append(p)
        elif glob.has_magic(p) and glob.glob(p):
            files += [f for f in glob.glob(p) if os.path.isfile(f)]
        else:
            raise SystemExit(f"tokenize_corpus.py: {p}: no such file or directory")
    files = sorted(set(os.path.abspath(f) for f in files))
    if not files:
        raise SystemExit("tokenize_corpus.py: the corpus holds no files")
    return files


def lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip():
                yield line


def atomic_write(path, data, mode="w"):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def train_tokenizer(files, out, vocab, max_sentences):
    """DIR/tokenizer.model, trained under a temporary prefix and renamed
    into place (the .vocab first, the .model last: other ranks wait for
    the .model)."""
    import sentencepiece as spm
    prefix = os.path.join(out, f".tokenizer-{os.getpid()}")

    def sentences():
        for f in files:
            yield from lines(f)

    spm.SentencePieceTrainer.train(
        sentence_iterator=sentences(), model_prefix=prefix,
        vocab_size=vocab, model_type="unigram", character_coverage=0.9995,
        hard_vocab_limit=False, input_sentence_size=max_sentences,
        shuffle_input_sentence=True, max_sentence_length=8192,
        remove_extra_whitespaces=False, minloglevel=2,
        num_threads=max(1, min(4, os.cpu_count() or 1)))
    os.rename(prefix + ".vocab", os.path.join(out, "tokenizer.vocab"))
    os.rename(prefix + ".model", os.path.join(out, MODEL))


def dtype_for(vocab):
    return "uint16" if vocab <= 65535 else "uint32"


def shard_name(i):
    return f"shard_{i:05d}"


def complete(out, i, source):
    """The marker of shard i when it is complete and made from SOURCE."""
    try:
        with open(os.path.join(out, shard_name(i) + ".json")) as f:
            m = json.load(f)
        size = os.path.getsize(os.path.join(out, m["file"]))
    except (OSError, ValueError, KeyError):
        return None
    item = 2 if m.get("dtype") == "uint16" else 4
    if m.get("source") != source or size != m.get("tokens", -1) * item:
        return None
    return m


def encode(job):
    """Encodes file i into shard i unless it is complete; returns its
    marker and whether it was written."""
    out, i, source = job
    m = complete(out, i, source)
    if m is not None:
        return m, False
    import array
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out, MODEL))
    dtype = dtype_for(sp.get_piece_size())
    eos = sp.eos_id() if sp.eos_id() >= 0 else 0
    buf = array.array("H" if dtype == "uint16" else "I")
    batch = []

    def flush():
        for ids in sp.encode(batch):
            buf.extend(ids)
            buf.append(eos)
        batch.clear()

    for line in lines(source):
        batch.append(line)
        if len(batch) >= 4096:
            flush()
    flush()
    if sys.byteorder != "little":
        buf.byteswap()
    name = shard_name(i)
    atomic_write(os.path.join(out, name + ".bin"), buf.tobytes(), "wb")
    m = {"file": name + ".bin", "tokens": len(buf), "dtype": dtype,
         "source": source}
    atomic_write(os.path.join(out, name + ".json"), json.dumps(m) + "\n")
    return m, True


def wait_for(what, ok, seconds):
    end = time.monotonic() + seconds
    while not ok():
        if time.monotonic() > end:
            raise SystemExit(f"tokenize_corpus.py: gave up waiting {seconds:.0f} s"
                             f" for {what}")
        time.sleep(0.2)


def main(argv=None):
    args = parse(argv)
    import sentencepiece as spm  # Debian's python3-sentencepiece
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if not 0 <= rank < world:
        raise SystemExit(f"tokenize_corpus.py: RANK {rank} is not below "
                         f"WORLD_SIZE {world}")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    files = corpus_files(args.corpus)
    model = os.path.join(out, MODEL)
    t0 = time.monotonic()
    if rank == 0:
        if os.path.exists(model):
            print(f"tokenize_corpus.py: {model} exists: not trained again",
                  flush=True)
        elif args.tokenizer:
            tmp = f"{model}.tmp-{os.getpid()}"
            shutil.copyfile(args.tokenizer, tmp)
            os.rename(tmp, model)
        else:
            train_tokenizer(files, out, args.vocab_size, args.max_sentences)
            print(f"tokenize_corpus.py: trained {model} ({args.vocab_size} pieces)"
                  f" in {time.monotonic() - t0:.1f} s", flush=True)
    else:
        wait_for(model, lambda: os.path.exists(model), args.wait)
    sp = spm.SentencePieceProcessor(model_file=model)
    vocab = sp.get_piece_size()
    if args.vocab_size and vocab != args.vocab_size and rank == 0:
        print(f"tokenize_corpus.py: {model} has {vocab} pieces (asked "
              f"{args.vocab_size})", flush=True)
    jobs = [(out, i, f) for i, f in enumerate(files) if i % world == rank]
    if world > 1 or args.workers == 1:
        results = [encode(j) for j in jobs]
    else:
        n = args.workers or os.cpu_count() or 1
        with multiprocessing.Pool(min(n, max(1, len(jobs)))) as pool:
            results = pool.map(encode, jobs, chunksize=1)
    wrote = sum(1 for _, w in results if w)
    print(f"tokenize_corpus.py: rank {rank}/{world}: {len(jobs)} shards, {wrote} "
          f"written, {len(jobs) - wrote} complete already "
          f"({sum(m['tokens'] for m, _ in results)} tokens)", flush=True)
    if rank != 0:
        return 0
    markers = {}

    def all_done():
        for i, f in enumerate(files):
            if i not in markers:
                m = complete(out, i, f)
                if m is None:
                    return False
                markers[i] = m
        return True

    wait_for("every shard", all_done, args.wait)
    index = {"version": 1, "dtype": dtype_for(vocab), "vocab_size": vocab,
             "tokenizer": MODEL,
             "tokens": sum(m["tokens"] for m in markers.values()),
             "shards": [{"file": markers[i]["file"],
                         "tokens": markers[i]["tokens"],
                         "source": markers[i]["source"]}
                        for i in range(len(files))]}
    atomic_write(os.path.join(out, "index.json"),
                 json.dumps(index, indent=1) + "\n")
    print(f"tokenize_corpus.py: {out}/index.json: {len(files)} shards, "
          f"{index['tokens']} tokens, {index['dtype']}, vocabulary {vocab},"
          f" {time.monotonic() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
