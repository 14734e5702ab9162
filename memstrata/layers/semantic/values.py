"""Is a slot value said in one language the same as one said in another? (cross-language
dedup: "lactose intolerant" / "乳糖不耐受" is one item.)

No alias table: the embedder decides, calibrated against a background of common values.
Raw cosines of multilingual-e5-small cannot tell a translation from a neighbour of the
same category ("Shanghai"/"上海" 0.87, "steak"/"红肉" 0.89, "hiking"/"swimming" 0.87), so
a pair matches only when each value is the other's **mutual nearest neighbour** among
the background values of the other language and stands out from them by
``min_z`` standard deviations. On the calibration pairs in ``tests/test_values.py``
(18 translations, 19 same-category non-translations) this accepts 13 translations and
no non-translation at ``min_z = 3``: it misses pairs whose near-synonym is in the
background ("diabetic"/"糖尿病" loses to "diabetes") or whose category neighbour wins
("Shanghai"/"上海" to "Beijing"), which leaves a duplicate, never a false merge.

:meth:`ValueMatcher.covers` asks a weaker, same-language question for cessations: is
"steak" a kind of "red meat" (so "no more red meat for me" ends "User loves steak")?
The general value must stand ``cover_z`` (1.8) deviations above the background as seen
from the specific one; on the pairs in the same test this accepts steak/red meat,
steakhouses/red meat, ice cream/dairy, chocolate/sugar, coffee/caffeine, beer/alcohol
and rejects tea/alcohol (1.66), salmon, chicken, sushi and wine/red meat, but misses
burgers/red meat and cheese/dairy: a cessation may leave a liking active, never end an
unrelated one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memstrata.providers.embedders import Embedder
from memstrata.text import detect_language

__all__ = ["ValueMatcher", "BACKGROUND"]

#: Common slot values of each language: the distractors a translation must beat.
BACKGROUND: dict[str, tuple[str, ...]] = {
    "en": tuple("football|basketball|music|movies|reading|travel|Tokyo|Beijing|Shanghai|London|"
                "New York|Paris|engineer|doctor|teacher|lawyer|student|tea|coffee|beer|wine|"
                "running|painting|cooking|singing|dancing|photography|chess|games|tennis|"
                "cycling|skiing|camping|gardening|programming|math|history|art|car|phone|rice|"
                "noodles|milk|eggs|seafood|chili|chocolate|vegetables|fruit|sweets|asthma|"
                "hypertension|diabetes|writing|cat|dog|rabbit".split("|")),
    "zh": tuple("足球|篮球|音乐|电影|读书|旅行|东京|北京|上海|伦敦|纽约|巴黎|工程师|医生|老师|律师|学生|"
                "茶|咖啡|啤酒|红酒|跑步|画画|烹饪|唱歌|跳舞|摄影|象棋|游戏|网球|骑自行车|滑雪|露营|园艺|"
                "编程|数学|历史|艺术|汽车|手机|米饭|面条|牛奶|鸡蛋|海鲜|辣椒|巧克力|蔬菜|水果|甜食|哮喘|"
                "高血压|糖尿病|写作|猫|狗|兔子".split("|")),
}


class ValueMatcher:
    """Cross-language value equality through an embedder (vectors cached per text)."""

    def __init__(self, embedder: Embedder, *, min_z: float = 3.0, cover_z: float = 1.8) -> None:
        self.embedder = embedder
        self.min_z = min_z
        self.cover_z = cover_z
        self._cache: dict[str, np.ndarray] = {}

    def prepare(self, values: Sequence[str]) -> None:
        """Embed values (and the background) in one batch ahead of many comparisons."""
        self._vectors([*values, *BACKGROUND["en"], *BACKGROUND["zh"]])

    def _vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            self._cache.update(zip(missing, self.embedder.embed(list(missing), kind="query")))
        return [self._cache[t] for t in texts]

    def _side(self, a: str, b: str, lang: str) -> tuple[float, bool]:
        bg = [x for x in BACKGROUND[lang] if x.casefold() not in (a.casefold(), b.casefold())]
        va, vb, *vbg = self._vectors([a, b, *bg])
        sims = np.array([float(va @ x) for x in vbg])
        s = float(va @ vb)
        return (s - float(sims.mean())) / max(1e-6, float(sims.std())), s > float(sims.max())

    def same(self, a: str | None, b: str | None) -> bool:
        """True when ``a`` and ``b`` are in different languages and name the same thing."""
        if not a or not b:
            return False
        la, lb = detect_language(a), detect_language(b)
        if la == lb:
            return False
        z1, first1 = self._side(a, b, lb)
        z2, first2 = self._side(b, a, la)
        return first1 and first2 and min(z1, z2) >= self.min_z

    def covers(self, general: str | None, specific: str | None) -> bool:
        """True when ``specific`` is a kind of ``general`` ("steak" of "red meat"), in
        the same language; equal values are not a cover (the slot rules read those)."""
        if not general or not specific or general.casefold() == specific.casefold():
            return False
        lang = detect_language(general)
        if detect_language(specific) != lang:
            return self.same(general, specific)
        z, _ = self._side(specific, general, lang)
        return z >= self.cover_z
