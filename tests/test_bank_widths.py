"""The shared-memory bank model for 4-, 8- and 16-byte accesses (models.BankAccess.wavefronts), checked
against textbook patterns and against the H200 counters of Levels 2, 5 and 7."""
import pytest

import gemm_course as gc
from gemm_course.measure import counters
from gemm_course.models import bank_access


def test_four_byte_accesses_are_unchanged():
    assert bank_access("ty", "tx").wavefronts == bank_access("ty", "tx").degree == 1
    assert bank_access("tx", "ty").wavefronts == 32                 # transposed store: 32-way
    assert bank_access("tx", "ty", pad=1).wavefronts == 1
    assert bank_access("tx", "ty", swizzle=True).wavefronts == 1
    assert bank_access("ty", "k", k=5).wavefronts == 1              # one word for every lane: a broadcast


def test_wide_contiguous_accesses_take_their_bytes_over_128():
    assert bank_access("0", "tx * 2", shape=(1, 64), width=8).wavefronts == 2    # 256 bytes
    assert bank_access("0", "tx * 4", shape=(1, 128), width=16).wavefronts == 4  # 512 bytes
    access = bank_access("0", "tx * 4", shape=(1, 128), width=16)
    assert access.wavefronts == access.ideal_wavefronts and access.phase_wavefronts == (2, 2)
    assert len(access.lane_words[0]) == 4


def test_sixteen_byte_broadcast_takes_one_wavefront_per_half_warp():
    access = bank_access("ty", "k", k=4, width=16)  # Level 2's LDS.128 of As[ty][k..k+3]
    assert access.wavefronts == 2 == access.ideal_wavefronts


def test_level2_loop_reproduces_the_measured_1_20():
    """Per 32 FFMA: 8 broadcast LDS.128 of A and 32 conflict-free LDS of B (the SASS)."""
    mix, _ = gc.sass.kernel_mix("02_smem_tiling", tile=32)
    assert (mix["LDS.128"], mix["LDS"], mix["FFMA"]) == (8, 32, 32)
    model = (8 * bank_access("ty", "k", k=0, width=16).wavefronts + 32 * bank_access("k", "tx", k=0).wavefronts) / 40
    measured = counters.derived(counters.find("02_smem_tiling", tile=32)["metrics"])["wavefronts_per_shared_load"]
    assert model == pytest.approx(1.20) and measured == pytest.approx(model, abs=0.001)


@pytest.mark.parametrize("level", ["05_register_blocking", "07_vectorized"])
def test_levels_5_and_7_wavefronts_per_k_tile(level):
    """Default 128×128×8 tile, 8×8 per thread: thread (tr, tc) = (tid / 16, tid % 16). Per k step a warp
    issues two LDS.128 of As[k][tr·8 + i] (2 addresses, each shared by 16 lanes) and two of Bs[k][tc·8 + j]
    (16 addresses 32 bytes apart, lanes l and l + 16 share one): the model gives 2 and 8 wavefronts."""
    a = bank_access("k", "ty * 8", shape=(8, 128), pad=4, block=(16, 16), width=16, k=3)
    b = bank_access("k", "tx * 8 + 4", shape=(8, 128), block=(16, 16), width=16, k=3)
    assert (a.wavefronts, b.wavefronts) == (2, 8)
    per_k_tile = 8 * 2 * (a.wavefronts + b.wavefronts)  # BK = 8 steps
    m = counters.find(level)["metrics"]
    warps_x_tiles = (4096 // 128) ** 2 * 8 * (4096 // 8)
    assert m["shared_load_wavefronts"] / warps_x_tiles == pytest.approx(per_k_tile, rel=0.005)
    # a quarter-warp rule (8 lanes per phase) would give 4 and 8: 192 per k-tile, 20% too many
    assert 8 * 2 * (4 + 8) / per_k_tile == pytest.approx(1.2)


def test_level7_average_is_5():
    measured = counters.derived(counters.find("07_vectorized")["metrics"])["wavefronts_per_shared_load"]
    assert measured == pytest.approx((2 + 2 + 8 + 8) / 4, abs=0.01)


def test_misaligned_or_odd_widths_are_refused():
    with pytest.raises(ValueError, match="aligned"):
        bank_access("0", "tx * 4 + 1", shape=(1, 132), width=16)
    with pytest.raises(ValueError, match="4, 8 or 16"):
        bank_access("0", "tx", width=12)
    with pytest.raises(ValueError, match="outside"):
        bank_access("0", "tx * 4", shape=(1, 126), width=16)


def test_bank_figure_draws_every_word_and_the_half_warps():
    fig = gc.plots.bank_figure(bank_access("k", "tx * 8", shape=(8, 128), block=(16, 16), width=16, k=0))
    assert len(fig.data[0].x) == 32 * 4 and max(fig.data[0].marker.color) == 8
    title = fig.layout.title.text.replace("<br>", " ")  # the title wraps to fit a phone screen
    assert "8 wavefronts" in title and len(fig.layout.shapes) == 1
    assert "32-way" in gc.plots.bank_figure(bank_access("tx", "ty")).layout.title.text.replace("<br>", " ")
