"""Calibration of cross-language value equality and "is a kind of" on the
real default embedder: the pairs the thresholds in memstrata/layers/semantic/values.py
were set on. A translation may be missed (a duplicate stays); a non-translation must
never pass (two different facts would be merged)."""

from __future__ import annotations

import pytest

from memstrata.layers.semantic.values import ValueMatcher
from memstrata.providers.embedders import parse_embedder

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TRANSLATIONS = [("lactose intolerant", "乳糖不耐受"), ("hiking", "爬山"), ("fishing", "钓鱼"),
                ("Shanghai", "上海"), ("red meat", "红肉"), ("coffee", "咖啡"), ("diabetic", "糖尿病"),
                ("vegetarian", "素食"), ("peanuts", "花生"), ("swimming", "游泳"), ("teacher", "老师"),
                ("dog", "狗"), ("allergic to peanuts", "对花生过敏"), ("jazz", "爵士乐"),
                ("nurse", "护士"), ("Berlin", "柏林"), ("yoga", "瑜伽"), ("tennis", "网球")]
OTHERS = [("lactose intolerant", "花生过敏"), ("hiking", "钓鱼"), ("fishing", "游泳"),
          ("Shanghai", "北京"), ("red meat", "咖啡"), ("coffee", "茶"), ("diabetic", "素食"),
          ("vegetarian", "乳糖不耐受"), ("peanuts", "红肉"), ("swimming", "爬山"), ("teacher", "医生"),
          ("dog", "猫"), ("lactose intolerant", "糖尿病"), ("steak", "红肉"),
          ("gluten free", "乳糖不耐受"), ("jazz", "摇滚"), ("nurse", "老师"), ("Berlin", "巴黎"),
          ("yoga", "跑步")]
KINDS = [("red meat", "steak"), ("red meat", "steakhouses"), ("dairy", "ice cream"),
         ("sugar", "chocolate"), ("caffeine", "coffee"), ("alcohol", "beer")]
NOT_KINDS = [("alcohol", "tea"), ("red meat", "salmon"), ("red meat", "chicken"),
             ("red meat", "sushi"), ("red meat", "wine"), ("red meat", "hiking"), ("dairy", "jazz")]


@pytest.fixture(scope="module")
def matcher() -> ValueMatcher:
    matcher = ValueMatcher(parse_embedder("local:e5-small"))
    matcher.prepare([v for pairs in (TRANSLATIONS, OTHERS, KINDS, NOT_KINDS) for p in pairs for v in p])
    return matcher


def test_translations_match_and_neighbours_of_a_category_do_not(matcher: ValueMatcher) -> None:
    accepted = [p for p in TRANSLATIONS if matcher.same(*p)]
    assert not [p for p in OTHERS if matcher.same(*p)]  # never a false merge
    assert len(accepted) >= 13, sorted(set(TRANSLATIONS) - set(accepted))
    assert ("lactose intolerant", "乳糖不耐受") in accepted
    assert not matcher.same("Python", "Python")  # same language: the slot rules decide


def test_a_cessation_covers_its_kinds_only(matcher: ValueMatcher) -> None:
    assert not [p for p in NOT_KINDS if matcher.covers(*p)]
    assert [p for p in KINDS if matcher.covers(*p)] == KINDS
