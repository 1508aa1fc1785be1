"""Every claim the book tests, in one table: the paper's sentence and where it stands, the statistic that
tests it (a key of a result's ``facts()``), which way favours the claim, its two thresholds, each with its
source (a number the paper gives, or our stated rationale), and the paper's own value of that statistic,
which the chapter's "paper vs this run" table puts beside this run's (:func:`depthutils.book.grading.paper_vs_run`).
"""
from __future__ import annotations

from depthutils.analysis.p2_table import reference_cot_tolerance
from depthutils.book.claim_types import LEVEL, Claim, Headline, Threshold
from depthutils.book.paper_values import (
    p2_cot_short,
    p2_difficulty_short,
    p2_lens,
    p2_lens_short,
    p2_scale_short,
    p2_values,
)
from depthutils.core.depth import LENS_POSITIONS
from depthutils.models.random_init import N_INITS

#: the outcomes a verdict can have, from best to worst for the claim, then the one that says nothing
OUTCOMES = ("shown", "mixed", "not shown", "not tested")
#: the fewest layers a "half" may hold: a mean over one layer is that layer, not a half of the network
MIN_HALF = 2
#: chapter 6: a group counts only if the model solves at least this share of every level compared
ACCURACY_FLOOR = 0.25
#: chapter 5: an attribution whose layer sums miss f(x) − f(b) by more than this share of the largest |f(x) − f(b_l)|
#: is not the integral it stands for (ours: completeness is P1's own sanity check for integrated gradients; 5% is
#: far above the gap of a converged rule, ~1e-3 on the embedded models and 0.004 on SmolLM2 with the adaptive
#: rule, and below P1's own rule's on SmolLM2's sums, 0.19–0.61)
COMPLETENESS_LIMIT = 0.05
#: chapter 7: permutations of the target layers that give the distance's chance distribution
N_PERMUTATIONS = 2000
#: chapter 7: "most source layers share one target" above this share
SHARED_TARGET = 0.5
#: chapter 7: the untrained-target test in words. Each untrained target is drawn at N_INITS initialisations
#: (:data:`depthutils.models.random_init.N_INITS`), so the null is a spread, not one draw: a trained pair inside it
#: (or beyond it) is not shown, and one below all of it, but not apart from every draw's interval, is mixed
UNTRAINED_RULE = (f"Against the untrained target (at least {N_INITS} initialisations of it, each mapped by the same "
                  "call): shown if the interval lies wholly below every initialisation's interval; not shown if the "
                  "distance is no smaller than the smallest of the initialisations' distances (inside their spread "
                  f"or beyond it); mixed otherwise, and at best mixed with fewer than {N_INITS} initialisations")
#: the sentence that explains a bootstrap interval on a whole-layer statistic
WHOLE_LAYER = ("An effective depth, a crossing or a best target is a whole layer, so a relative depth or ratio built "
               "from it moves in steps of 1/L: its bootstrap interval can be a single value (every resample gives the "
               "same layer) or jump by a whole step.")


#: chapter 6's reviewer's split: the deeper model's share of a family's flips (problems one model of the pair solves
#: and the other does not) under symmetric noise, which the only-deeper group must clear to be graded
FLIP_NULL = Threshold(0.5, "symmetric noise: where greedy correctness is far from certain, a problem's answer flips "
                           "between two models as often one way as the other, so the only-shallower group is the "
                           "only-deeper group's noise baseline (McNemar's test)")
#: chapter 6: the power at which the chapter says how many flips, and problems, its noise gate needs (the
#: conventional 80%)
POWER = 0.8
#: chapter 6: the noise gate in words (:data:`FLIP_NULL`)
NOISE_GATE = (f"a family's only-deeper group counts as more than noise only if the exact (Clopper–Pearson) "
              f"{100 * LEVEL:.0f}% interval of the deeper model's share of the family's flips, only-deeper / "
              f"(only-deeper + only-shallower), lies wholly above {FLIP_NULL.value} ({FLIP_NULL.source}); otherwise the "
              "family is not tested, whatever its difference of depth scores reads (that difference is printed, not "
              "graded): its only-deeper group may be mostly the flips of a noisy greedy answer, not problems that need "
              "the deeper model's depth")
#: chapter 2: the output half of P1's future-effects claim, graded against its own thresholds
OUTPUT_SHOWN = Threshold(0.5, "ours: the same reading of “much smaller”, at most half; P1 gives no number for the "
                              "output either")
OUTPUT_AGAINST = Threshold(1.0, "ours: above 1 second-half layers move the output more than first-half ones")
#: chapter 9: “the number of effective layers grows with model size”, graded on the slope of ED against L
GROWS = Threshold(0.0, "ours: a slope whose interval lies wholly above 0 is a rise outside the noise; one wholly at "
                       "or below 0 is no rise")
#: chapter 9: what P2 says of each metric's ratio across scale, beside that metric's tolerance (P2's own spread)
SCALE_WORDS = {
    "cos": "P2 writes of the cosine ratio “The results show that the effective depth ratio remains remarkably "
           "stable.” (§4.1)",
    **dict.fromkeys(("kl", "overlap"),
                    "P2 calls the logit-lens ratios “slightly less consistent across scales than the cosine similarity "
                    "metric, with a mild increasing trend in ratio for larger models” (§4.1), and its abstract still "
                    "says the ratio “remains stable”, so we take P2's own spread as the most the claim allows (ours)"),
}
#: chapter 9: P2's largest base-to-long-CoT rise in Table 1 (rise, metric, size), the chain-of-thought tolerance
COT_RISE = reference_cot_tolerance()


_MODELS_P1 = ("models", "Llama 3.1 8B/70B/405B and Qwen 3 8B/14B/32B; OLMo 2 7B/13B/32B in the rebuttal (the "
                        "abstract: “we analyze the residual stream of the Llama 3.1, Qwen 3, and OLMo 2 family of "
                        "models”)")
_QWEN3_32B = ("Qwen 3 32B (the authors' OpenReview reply, on their Fig. 18e)",
              "“Layers >50 have low influence on the future layers (the bottom right triangle tip), except for the "
              "last 1-2, similarly to the late layers of other models.”")

CLAIMS: dict[str, Claim] = {c.key: c for c in [
    Claim("residual_stream", "00", "P1",
          "§2, its notation (and the project's measurement specification, its check on every family)",
          "in our words: every layer adds its attention output and its MLP output to the residual stream, "
          "hₗ₊₁ = hₗ + aₗ + mₗ, so what a layer contributes can be read off its two sublayers",
          "the largest relative error ‖hₗ₊₁ − (hₗ + aₗ + mₗ)‖ / ‖hₗ₊₁‖ over "
          "layers, tokens and prompts, with aₗ and mₗ read as the family adapter reads what each sublayer adds",
          Threshold(1e-4, "ours: float32 rounding through a few layers is ~1e-6 per layer (tests/conftest.py), "
                          "so 1e-4 leaves a hundredfold margin; a bf16 model needs ~1e-2"),
          Threshold(1e-2, "ours: a sublayer read wrongly (a raw output where a post-norm is added) leaves an "
                          "error of order 1"),
          fact="max_error", short="largest relative error of hₗ₊₁ = hₗ + aₗ + mₗ",
          paper_value="— (P1 states the identity and reports no measured error; ours: 0 up to float rounding)",
          paper_facts=(("models", "any pre-norm transformer (P1's Llama 3.1, Qwen 3, OLMo 2)"),),
          overview=(Headline("P1's notation: hₗ₊₁ = hₗ + aₗ + mₗ", "0 up to rounding (ours)", real=True),)),
    Claim("contributions", "01", "P1", "abstract; Fig. 2",
          "“layers in the second half contribute much less than those in the first half, with a clear phase "
          "transition between the two halves”",
          "the mean whole-layer ‖Δₗ‖ / ‖hₗ‖ of the second half of the layers over "
          "that of the first half (layer 0, which writes onto the bare embedding, apart)",
          Threshold(0.5, "ours: “much less” read as at most half"),
          Threshold(1.0, "ours: above 1 the second half contributes more than the first"),
          fact="ratio", short="second-half over first-half mean ‖Δₗ‖ / ‖hₗ‖",
          paper_value="no number in the text; below 1 read off Fig. 2, and “much less” read as at most 0.5 (ours)",
          paper_facts=(_MODELS_P1, ("prompts", "N = 20 GSM8K test problems"),
                       ("last layers", "— (P1 gives no number or statement on the last layers' contribution; the "
                                       "ratio without the last layer is ours)")),
          overview=(Headline("P1: second-half layers contribute much less", "below 1 (Fig. 2)", real=True),)),
    Claim("future_effects", "02", "P1", "abstract; Fig. 3",
          "“skipping layers in the second half has a much smaller effect on future computations and output "
          "predictions”",
          "the mean effect of skipping a second-half layer over that of a first-half layer (P1's max over positions "
          "and prompts), on later layers (future computations) and on the output distribution (output "
          "predictions), each graded",
          Threshold(0.5, "ours: “much smaller” read as at most half"),
          Threshold(1.0, "ours: above 1 second-half layers matter more to later ones"),
          fact="later_ratio, out_ratio", short="second-half over first-half effect on later layers; on the output",
          paper_value="no number in the text; both below 1 read off Fig. 3, and “much smaller” read as at most 0.5 "
                      "(ours)",
          paper_facts=(_MODELS_P1, ("prompts", "N = 10 GSM8K test problems, 4 positions t each"), _QWEN3_32B),
          overview=(Headline("P1: skipping a second-half layer matters much less", "both below 1 (Fig. 3)",
                             real=True),)),
    Claim("logit_lens", "03", "P1", "Fig. 4; abstract",
          "in our words, by our reading of Fig. 4: the logit lens stays far from the output in the first half and "
          "converges in the second, where the layers refine the output distribution",
          "P2's ratio (ED + 1)/L, the relative depth of the first layer l whose input hₗ has a lens KL below half "
          "its maximum, and of the first whose top-5 overlap exceeds 0.3 (P2's thresholds), each graded",
          Threshold(0.5, "ours: P1 puts “a clear phase transition between the two halves” (said of the layers' "
                         "contributions, chapter 1); we grade the lens against the same middle, 0.5"),
          Threshold(0.5, "ours: the same middle: a crossing wholly in the first half converges early"),
          fact="kl_rel, overlap_rel",
          below=False, whole_layer=True, short="relative depth where the lens converges (KL halves; overlap > 0.3)",
          paper_value=p2_lens,
          paper_facts=(_MODELS_P1, ("prompts", "N = 20 GSM8K test problems")),
          overview=(Headline("P1: the logit lens converges in the second half", p2_lens_short, real=True),)),
    Claim("context", "04", "P1", "Fig. 6",
          "in our words: context positions (operands, entities) stop mattering by about the middle of the network "
          "(NDIF's reproduction notebook of P1: “all tokens are important until halfway through the network”)",
          "per kind of prompt (arithmetic, sums of three or more numbers where tried, two-hop), the mean over its "
          "prompts of the relative depth of the deepest "
          "layer at which intervening at a context position still moves the answer by more than 10% of the largest "
          "effect (ours: what counts as mattering; the mean rather than the share of prompts below a threshold, "
          "because the thresholds are relative depths and a share would need a second threshold with no source); "
          "the claim is shown if every kind is, not shown if one is",
          Threshold(0.6, "ours: the middle, 0.5, plus a tenth of slack"),
          Threshold(0.8, "ours: context still matters in the last fifth of the layers"),
          fact="deepest_rel", short="mean over prompts of the deepest relative depth at which a context position "
                                     "matters",
          paper_value="≈ 0.5 (ours, from NDIF's reproduction notebook of P1, which reads its erasure and attribution "
                      "plots as “all tokens are important until halfway through the network”); no number in the "
                      "paper's text",
          paper_facts=(("models", "Llama 3.1 70B (Fig. 6)"),
                       ("prompts", "`5 + 7 + 5 + 3 + 1 + 7 = ` → 28; `The spouse of the performer of Imagine is` "
                                   "→ Yoko Ono"),
                       ("integrated gradients", "K = 256 points, batches of 16")),
          overview=(Headline("P1: context stops mattering by about the middle", "≈ 0.5 (NDIF's notebook; ours)",
                             real=True),
                    Headline("P1: the same, by integrated gradients", "≈ 0.5 (NDIF's notebook; ours)", real=True,
                             chapter="05"),))] + [
    Claim("depth_score", "06", "P1", "abstract; depth score against difficulty",
          "“for multihop tasks, we are unable to find evidence that models are using increased depth to compose "
          "subresults in examples involving many hops”",
          "per task family, the least-squares slope against the level's rank (0, 1, …) of P1's level score: the "
          "depth score of the level's effect matrix D, maxed over its prompts and positions, divided by L − 1 "
          "(prompts resampled within levels, each level's max and score recomputed)",
          Threshold(None, "ours: a rise of less than one layer from the easiest to the hardest level, "
                          "1 / ((L−1)·(levels−1)), is below the resolution of a layer index"),
          Threshold(0.0, "a slope whose interval lies wholly above 0 is a rise outside the noise"),
          fact="{task}_slope", short="slope per level of the normalised depth score of the level max of D",
          paper_value="no number given; no rise found (“unable to find evidence”); ours: a slope within one layer "
                      "over the levels",
          paper_facts=(("models", "Llama 3.1 70B, Qwen 3"), ("prompts", "20 problems per level: MATH levels 1–5, "
                                                                        "2/3/4-hop questions"),
                       ("accuracy", "— (ours: a family counts only where the model solves enough of every level)")),
          overview=(Headline("P1: problems with more hops use no more depth", "no rise, no number", real=True),)),
    Claim("only_deeper", "06", "P1", "abstract (its position); a reviewer's question on OpenReview (not the paper)",
          "in our words: do the problems only a deeper model solves use more of its depth than those a shallower "
          "model solves too? (A reviewer wrote “when evaluating deep and shallow models, it would be informative to "
          "separately consider tasks that are solved by neither model, only by the deep model, and by both models.”) "
          "P1's abstract holds that “deeper models are not using their depth to learn new kinds of computation”, so "
          "they should not",
          "per task family, the deeper model's mean normalised depth score (each problem's depth score of D divided "
          "by L − 1) over the problems only it solves minus that over the problems both models solve (two ladder "
          "models differing only in depth, on the same problems, all held out of their training; each family "
          "resampled on its own)",
          Threshold(None, "ours: less than one layer of the deeper model, 1 / (L − 1), is below the resolution of a "
                          "layer index (chapter 6's tolerance)"),
          Threshold(0.0, "ours: a difference whose interval lies wholly above 0 is more depth outside the noise"),
          fact="{task}_diff", short="only-deeper minus both: mean normalised depth score of the deeper model",
          paper_value="— (P1 gives no number and ran no such split: a reviewer's question; ours: a difference within "
                      "one layer, as its abstract's “not using their depth to learn new kinds of computation” reads)",
          paper_facts=(("models", "— (P1 ran no such split)"),
                       ("groups", "— (the reviewer's split: neither, only the deeper, only the shallower, both)")),
          overview=(Headline("Ours, on a reviewer's question: problems only the deeper model solves use no more depth",
                             "no number",
                             "verdict_only_deeper", question="Do the problems only the deeper model solves use at "
                             "most one layer more of its depth than those both solve? (*shown*: yes; *not shown*: no, "
                             "they use more)"),)),
    Claim("mapping", "07", "P1", "abstract; linear maps from a shallow to a deep model",
          "“layers with the same relative depth map best to each other, suggesting that the larger model simply "
          "spreads the same computations out over its many layers”",
          "per mapping, the mean |relative depth of the best target − relative depth of the source| over source "
          "layers, against the same source mapped onto the deeper model's untrained initial weights, drawn "
          f"{N_INITS} times (the null: ours, what the architecture and the residual stream's accumulation give "
          "without training, and how much that varies from one draw to another) and against "
          "its chance distribution when the target layers are permuted",
          Threshold(None, f"the 5th percentile of the distance under {N_PERMUTATIONS} random permutations of the "
                          "target layers: closer to the diagonal than 95% of chance maps (5%: the conventional level)"),
          Threshold(None, "the same percentile: a distance chance reaches more than 5% of the time"),
          fact="distance", short="distance of the best targets from the relative-depth diagonal",
          paper_value="no number given; the best matches lie on the diagonal of P1's heatmap, a distance near 0 (ours)",
          whole_layer=True,
          paper_facts=(("models", "Qwen2.5-1.5B → Qwen2.5-14B"),
                       ("result", "a diagonal in the source × target heatmap"),
                       ("untrained target (null)", "— (none in the P1 text the book quotes)"),
                       ("second seed (positive control)", "— (none in the P1 text the book quotes)")),
          overview=(Headline("P1: a deeper model matches at the same relative depth", "on the diagonal"),))] + [
    Claim("shared_layers", "08", "P1", "outlook: MoEUT",
          "in our words: a shared-layer model (MoEUT) tends to use more of its depth than a standard transformer "
          "trained on the same task; P1 calls this preliminary",
          "the shared-layer model minus the stacked one on three numbers where larger means later layers matter "
          "more (late/early future-effect ratio, KL effective-depth ratio, normalised depth score averaged over the "
          "prompts: ours, not P1's per-level max)",
          Threshold(0.0, "a difference whose interval lies wholly above 0 is outside the noise"),
          Threshold(0.0, "the same 0 from below"),
          fact="diff_{measure}", below=False, whole_layer=True, short="shared-layer minus stacked model",
          paper_value="no number given; MoEUT “tends to utilize more depth in its computation” (the authors' "
                      "OpenReview wording; preliminary), a difference above 0 (ours)",
          paper_facts=(("models", "MoEUT against a standard transformer, same task and data"),
                       ("status", "P1: preliminary; no large shared-layer model exists")),
          overview=(Headline("P1 (preliminary): a shared-layer model uses more depth", "above 0, no number"),)),
    Claim("objectives", "10", "P1", "the authors' replies on OpenReview",
          "“Our hypothesis is that if we were to take the same task and combine it with language modeling, the model "
          "would likely use fewer layers for the task and dedicate the final layers to probability refinement.” … "
          "“forcing the model to learn the question distribution seems to force the feature building stage to end "
          "earlier.”",
          "on three measures read at the answer-predicting position, each predicted larger when the late layers still "
          "build features (later-layer and output effect ratios, normalised depth score), the answer-only objective "
          "(A) minus Q+A and Q+A minus LM, paired by seed, at matched accuracy",
          Threshold(0.0, "ours: a difference whose band over seeds, on the larger of its own spread and the null "
                         "control's (A − A′), lies wholly above 0, with every seed's own difference above 0"),
          Threshold(0.0, "the same 0 from below"),
          fact="{task}_matched_{pair}_{measure}", below=False, whole_layer=True, short="A minus Q+A, Q+A minus LM",
          paper_value="no number given: a hypothesis, A > Q+A > LM in depth used (ours, from the authors' words); "
                      "“Studying this systematically would be an interesting follow-up work.”",
          paper_facts=(("models", "none trained: a hypothesis, with P1's Q and Q+A models (Figs. 31, 32) as a hint"),
                       ("this book", "8 layers; the S5 word problem (needs depth) and Z10 chains (a control with a "
                                     "shortcut); 3 objectives, designed for 5 seeds each (the seeds trained are "
                                     "counted in the chapter's first output), and a null control (A′)")),
          overview=(Headline("P1's hypothesis: modelling the question ends feature building earlier (S5)",
                             "A > Q+A > LM, no number", "verdict_s5"),
                    Headline("the same on Z10, a control with a shortcut (ours)", "none (our control)",
                             "verdict_z10"),)),
    Claim("depth_premise", "10", "P1", "the authors' replies on OpenReview: “a synthetic task requiring 10 layers”",
          "in our words: within the sweep's budget, at the lengths trained, the S5 word problem needs more layers than "
          "the C10 control (additions mod 10)",
          "the depth-necessity sweep (objective A on each task at 2, 4 and 8 layers, three seeds, 6,000 steps of 128 "
          "chains of 1–12 operations at a constant learning rate): a run's frontier k* is the longest length up to "
          "which it is ≥ 0.9 on every length of 2+ operations; the premise's lengths run from 2 to K, the smaller of "
          "C10's frontier at 2 layers and the longest S5 frontier at more layers (a cell's frontier: its seeds' "
          "smallest)",
          Threshold(0.0, "ours: every S5 seed at 2 layers has a frontier below K"),
          Threshold(0.0, "ours: every S5 seed at 2 layers reaches K (seeds disagreeing: mixed)"),
          short="the frontier of S5 at 2 layers against the lengths of the premise",
          paper_value="no number: a task that needs depth (ours: this premise)",
          overview=(Headline("Ours: S5 needs more layers than C10 at the trained lengths (the premise)", "none (ours)",
                             "verdict_premise"),)),
    Claim("norm_growth", "01", "P1", "abstract; Fig. 2; a reviewer's question on residual-norm growth",
          "in our words, the question graded here: is the second half's smaller relative contribution (chapter 1) "
          "only the residual's norm growing, with what each layer writes, ‖Δₗ‖, not falling? (A reviewer asked for "
          "“tying the observed logit-sharpening behavior to activation growth patterns”.)",
          "the mean whole-layer ‖Δₗ‖ of the second half of the layers over that of the first half (layer 0, which "
          "writes onto the bare embedding, apart; position 0, where massive activations and attention sinks sit, "
          "apart), asked only where the relative contribution ‖Δₗ‖ / ‖hₗ‖ falls (its second-to-first ratio wholly "
          "below 1; otherwise there is no drop to explain: not tested)",
          Threshold(1.0, "ours, from the question: at or above 1 what a layer writes does not fall, so the relative "
                         "fall is the norm's growth alone"),
          Threshold(1.0, "the same 1 from below: what a layer writes falls too, so the fall is not only the norm's"),
          fact="abs_ratio", below=False, short="second-half over first-half mean ‖Δₗ‖",
          paper_value="— (P1 measures only ‖Δₗ‖ / ‖hₗ‖ and gives no number for ‖Δₗ‖, nor does the reviewer; ours: a "
                      "fall that is the norm's growth alone would put this ratio at or above 1)",
          paper_facts=(_MODELS_P1, ("prompts", "N = 20 GSM8K test problems")),
          overview=(Headline("Ours, on a reviewer's question: the second half's smaller relative contribution is only "
                             "the residual's norm growing", "no number", "verdict_norms",
                             real=True, question="Is the second half's smaller relative contribution only the "
                             "residual's norm growing? (*shown*: yes, what a layer writes does not fall; *not shown*: "
                             "no, it falls too)"),)),
    Claim("massive_clamp", "01", "P1", "a reviewer's question on massive activations and logit sharpening",
          "in our words, the question graded here: does the second half's sharpening of the output distribution "
          "depend on position 0's massive activations, so that clamping them removes most of it? (A reviewer asked "
          "for “tying the observed logit-sharpening behavior to activation growth patterns”.)",
          "graded only where position 0 has massive activations, and at most mixed unless clamping as many other "
          "components of position 0 (the control) leaves its own ratio wholly above 0.5: the logit lens's KL to the "
          "model's own output on h_mid (the residual entering the second half of layers 1 … L−1, mean over each "
          f"prompt's last {LENS_POSITIONS} positions) with every massive component of position 0 clamped to the "
          "token median at every layer's input from where it appears, over the same KL of the clean model in the "
          "same forward",
          Threshold(0.5, "ours, from the question: at most half of the sharpening the second half does survives "
                         "the clamp, so the massive activations carry most of it"),
          Threshold(0.5, "the same half from above: most of the sharpening survives without them"),
          fact="survive", short="lens KL on h_mid, clamped over clean",
          paper_value="— (neither P1 nor the reviewer gives a number; ours: massive activations that carry the "
                      "sharpening would put this ratio at or below 0.5)",
          paper_facts=(_MODELS_P1, ("prompts", "N = 20 GSM8K test problems")),
          overview=(Headline("Ours, on a reviewer's question: clamping position 0's massive activations removes most "
                             "of the second half's sharpening", "no number", "verdict_clamp", real=True,
                             question="Does the second half's sharpening of the output distribution need position 0's "
                             "massive activations? (*shown*: yes, clamping them removes at least half of it; "
                             "*not shown*: no, most of it survives the clamp)"),)),
    Claim("early_exit", "03", "P1", "§5's discussion; a reviewer's question on it and the authors' reply (OpenReview)",
          "in our words: P1's discussion suggests the second half might be wasteful (distribution matching); a "
          "reviewer asked whether that matching is still necessary, and the authors were unsure how many layers it "
          "needs. The statement graded (ours, the side of the reviewer's question): even with a cheap readout (the final "
          "norm, one affine map fitted per layer, then the unembedding) that beats the raw lens at every layer, "
          "a model cut after its first half loses most of the answers the full model gets right",
          "the share of the answer tokens the full model predicts (top-1) that the model cut after its first half, "
          "whose output is the tuned readout on the residual after the first half (fitted on held-out prompts of the "
          "kinds graded, never a graded one), gets wrong; per set of prompts, each graded",
          Threshold(0.5, "ours: most of the full model's correct answer tokens, more than half, need the second half "
                         "even with a cheap readout (the reviewer's reading)"),
          Threshold(0.5, "the same half from below: a cheap readout keeps most of them (P1's suggestion that the "
                         "second half might be wasteful)"),
          fact="tuned_lost", below=False, short="share of correct answer tokens lost, cut after the first half, "
                                                "tuned readout",
          paper_value="— (neither P1 nor its reviewers give a number; ours: the reviewer's reading as more than 0.5, "
                      "P1's suggestion as less)",
          paper_facts=(_MODELS_P1, ("prompts", "N = 20 GSM8K test problems (Fig. 4)")),
          overview=(Headline("Ours, on a reviewer's question: cut at the middle, with a tuned readout that beats "
                             "the raw lens at every layer, does a model lose most answers?", "no number",
                             "verdict_exit", real=True, question="Cut after its first half, with a tuned readout that "
                             "beats the raw lens at every layer, does the model lose most of the answers the full model "
                             "gets right? (*shown*: yes, it loses more than half; *not shown*: no, it keeps most; *not "
                             "tested* where no such readout was fitted)"),)),
    Claim("scale", "09", "P2", "abstract; Table 1",
          "“while the number of effective layers grows with model size, the effective depth ratio remains stable”",
          "the least-squares slope of the mean ED (over tasks, in layers) against L across the ladder (ED grows), "
          "and the largest minus the smallest mean ratio (over tasks) across the ladder (the ratio is stable), each "
          "graded",
          Threshold(None, "per metric, P2's Table 1: the spread of the same statistic across Qwen2.5-Instruct "
                          "1.5B → 32B"),
          Threshold(None, "the same spread"),
          fact="scale_ed_slope, scale_spread", short="slope of ED against L; largest − smallest mean ratio across sizes",
          question="model size",
          paper_value=lambda: p2_values({"ED slope": "scale_ed_slope", "ratio spread": "scale_spread"},
                                  "Qwen2.5-Instruct 1.5B–32B"),
          whole_layer=True,
          paper_facts=(("models", "Qwen2.5 1.5B–32B base, Instruct and Math; DeepSeek-R1-Distill-Qwen 1.5B–32B"),
                       ("prompts", "10 HellaSwag, 10 GSM8K, 5 AIME24 problems of at most 400 tokens")),
          overview=(Headline("P2: ED grows with size, the ED ratio stays stable", p2_scale_short, "verdict_scale"),)),
    Claim("cot", "09", "P2", "abstract; Table 1",
          "“comparisons between base and corresponding long-CoT models show no increase in effective depth”",
          "the mean ratio of the chain-of-thought model minus that of its base",
          Threshold(COT_RISE[0], f"P2's Table 1: its largest rise of the mean ratio from a base model to its long-CoT "
                                 f"model over its four pairs (Appendix B) and three metrics, {COT_RISE[1]} at "
                                 f"{COT_RISE[2]}; P2 finds “no significant difference in effective depth ratio "
                                 "between long-CoT and base models” (§4.2)"),
          Threshold(COT_RISE[0], "the same rise"),
          fact="cot_gain", whole_layer=True, short="long-CoT minus base mean ratio",
          question="long chain-of-thought training",
          paper_value=lambda: p2_values("cot_gain", "each DeepSeek-R1-Distill-Qwen model minus its same-size base"),
          overview=(Headline("P2: long chain of thought does not raise the ratio", p2_cot_short, "verdict_cot"),)),
    Claim("difficulty", "09", "P2", "abstract; Table 1",
          "“models do not dynamically use more layers for harder problems”",
          "the mean ratio over the ladder on AIME24 minus that on HellaSwag and GSM8K",
          Threshold(None, "ours: one layer, the mean of 1/L over the ladder"),
          Threshold(None, "the same step"),
          fact="hard_gain", whole_layer=True, short="AIME24 minus HellaSwag and GSM8K mean ratio",
          question="task difficulty",
          paper_value=lambda: p2_values("hard_gain", "Qwen2.5-Instruct 1.5B–32B"),
          overview=(Headline("P2: harder tasks do not raise the ratio", p2_difficulty_short, "verdict_difficulty"),)),
]}

