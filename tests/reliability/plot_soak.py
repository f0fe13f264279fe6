#!/usr/bin/env python3
"""Draws the soak's CSV (minferd_soak --csv): requests served and errors over
time, and the daemon's RSS and descriptor count, as one PNG.
    plot_soak.py soak.csv soak.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = list(csv.DictReader(open(sys.argv[1])))
t = [float(r["seconds"]) / 60 for r in rows]
col = lambda k: [float(r[k]) for r in rows]  # noqa: E731
served = [a + b for a, b in zip(col("plain_ok"), col("stream_ok"))]
errors = [a + b + c for a, b, c in zip(col("mismatched"), col("other_status"), col("no_answer"))]

fig, ax = plt.subplots(3, 1, figsize=(9, 9), sharex=True)
ax[0].plot(t, served, label="completions served")
ax[0].plot(t, col("rejected_503"), label="503 (queue full)")
ax[0].plot(t, col("cancelled"), label="cancelled mid-stream by clients")
ax[0].plot(t, col("dropped"), label="dropped before an answer", color="tab:brown")
ax[0].plot(t, errors, label="errors (mismatch, other status, no answer)", color="red", linestyle="--")
ax[0].set_ylabel("requests (cumulative)")
ax[0].legend(fontsize=8)
rss = [v / 1024 for v in col("rss_kib")]
ax[1].plot(t, rss, color="tab:purple")
ax[1].set_ylabel("minferd RSS (MiB)")
ax[1].set_ylim(0, max(rss) * 1.25)
fds = col("fds")
ax[2].plot(t, fds, color="tab:green")
ax[2].set_ylabel("minferd open fds")
ax[2].set_ylim(0, max(fds) * 1.25)
ax[2].set_xlabel("minutes")
fig.suptitle("minferd soak: stories260K, CPU backend, mixed load with cancellations")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=90)
print(f"plot_soak.py: wrote {sys.argv[2]}")
