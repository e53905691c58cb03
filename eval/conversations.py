"""Conversations for the real-model evaluation, generated from a seed.

A conversation is what players say to the assistant in an inn, before and after the history
has been compacted: a greeting, planted facts of several kinds (numbers, names, places,
promises, passwords, relations) in several phrasings (plain, "remember this:", inside small
talk, as an aside), facts that change later, whispered facts, distractors (similar facts
with other values) and small talk; then questions, each knowing the words of a right answer
and the words of a wrong one (a superseded value, a distractor's value, a private fact
asked for by someone it was not whispered to). The pools are large enough that two seeds
share little, so that nothing in the product can be tuned to one conversation; the fixed
conversation that ``make eval-local`` played before remains one case (``fixed``).

Nothing in ``ai/`` may know any of these names or facts.
"""

import random
from dataclasses import dataclass, field

KINDS = ("number", "name", "place", "promise", "password", "relation")
# A pet or a relative keeps its name; a price, a hiding place, a promise or a password changes.
CHANGEABLE = ("number", "place", "promise", "password")
PHRASINGS = ("plain", "remember", "small_talk", "aside")

PLAYER_NAMES = (
    "Ada", "Bram", "Cora", "Dain", "Edda", "Finn", "Greta", "Hugo", "Ilse", "Joss", "Kira",
    "Lorn", "Mabel", "Nils", "Odile", "Pim", "Quill", "Rosa", "Sten", "Tilda", "Ulric",
    "Vera", "Wynn", "Yara", "Zeno", "Alba", "Birk", "Cass", "Dov", "Esme", "Falk", "Gwen",
    "Hale", "Ines", "Jory", "Kett", "Lida", "Moss", "Nell", "Orla",
)  # fmt: skip
ASSISTANT_NAMES = (
    "Pell", "Sorrel", "Tamsin", "Corvin", "Ysolde", "Brannoc", "Merrow", "Fennick", "Idris",
    "Larkin", "Oswin", "Rhoswen",
)  # fmt: skip
INNS = (
    "Salt Lantern", "Gilded Eel", "Copper Kettle", "Drowned Bell", "Whistling Pig",
    "Broken Oar", "Amber Stag", "Three Crowns", "Sleeping Fox", "Iron Ladle", "Blue Heron",
    "Painted Mule",
)  # fmt: skip
TOWNS = (
    "Brackwater", "Eastmere", "Fallowden", "Glimmerholt", "Hollinford", "Kestrel Rock",
    "Lowmarsh", "Morrowgate", "Nettlebank", "Oakhurst", "Pennick", "Quarry Hill", "Redfern",
    "Saltcombe", "Thornwick", "Umberlee", "Vellin", "Westerby", "Yarrowdale", "Zellholm",
)  # fmt: skip
# (the landmark as said, the word a right answer must hold)
LANDMARKS = (
    ("the old mill", "mill"), ("the broken cistern", "cistern"), ("the chapel crypt", "crypt"),
    ("the hollow elm", "elm"), ("the lighthouse", "lighthouse"),
    ("the stone bridge", "bridge"), ("the watchtower", "watchtower"),
    ("the east granary", "granary"), ("the old tollbooth", "tollbooth"),
    ("the ruined abbey", "abbey"), ("the ferry landing", "landing"),
    ("the clock tower", "clock"), ("the tannery yard", "tannery"),
    ("the herb garden", "garden"), ("the boat shed", "shed"),
)  # fmt: skip
HIDDEN_THINGS = (
    "the spare key", "the treasure map", "the silver chalice", "the ledger", "the letter",
    "the golden compass", "the spell book", "the pearl necklace", "the wine cask",
    "the old sword",
)  # fmt: skip
DOORS = (
    "the cellar door", "the east gate", "the vault", "the guild hall", "the tower stair",
    "the boathouse", "the armoury", "the chapel door", "the bell loft", "the river lock",
)  # fmt: skip
PASSWORDS = (
    "marigold", "thistle", "copperhead", "nightjar", "quicksilver", "bramble", "kingfisher",
    "saffron", "pinecone", "moonwort", "tinderbox", "hazelnut", "gooseberry", "starling",
    "larkspur", "wolfsbane",
)  # fmt: skip
PETS = ("horse", "dog", "cat", "goat", "falcon", "mule", "parrot", "ox")
PET_NAMES = (
    "Biscuit", "Clover", "Pepper", "Ember", "Dumpling", "Rascal", "Nutmeg", "Bramwell",
    "Sprocket", "Tansy", "Whisker", "Marlow", "Puddle", "Cinder", "Pippin", "Barnaby",
)  # fmt: skip
RELATIONS = ("sister", "brother", "cousin", "uncle", "aunt", "grandmother", "nephew", "niece")
RELATIVE_NAMES = (
    "Aldo", "Berit", "Ciaran", "Dagny", "Emrys", "Freya", "Gideon", "Hester", "Ivo", "Jessa",
    "Konrad", "Liesel", "Magnus", "Nerys", "Osric", "Petra",
)  # fmt: skip
OCCUPATIONS = (
    "a miller", "a ferryman", "a glassblower", "a beekeeper", "a scribe", "a shepherd",
    "a rope maker", "a bell founder", "a fishwife", "a toll keeper",
)  # fmt: skip
# (who, what they sell)
MERCHANTS = (
    ("the blacksmith", "horseshoe"), ("the baker", "loaf"), ("the ferryman", "crossing"),
    ("the cobbler", "pair of boots"), ("the weaver", "bolt of cloth"),
    ("the chandler", "box of candles"), ("the cooper", "barrel"), ("the tailor", "cloak"),
)  # fmt: skip
COINS = ("copper", "silver")
GOODS = (
    "wool", "honey", "wax", "lamp oil", "barley", "nails", "flour", "cheese", "apples",
    "arrows", "firewood", "turnips",
)  # fmt: skip
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SMALL_TALK = (
    "What a wet evening it is outside.",
    "The stew smells better than it did yesterday.",
    "My boots are still full of mud from the road.",
    "Have you heard the minstrel who came in last night?",
    "I could sleep for a week after today.",
    "The fire is burning low again.",
    "Do you ever get tired of this place?",
    "The roads were quiet on my way here.",
    "I think the cat has taken my chair again.",
    "Someone left the door open and now it is freezing.",
    "This bread is harder than a cobblestone.",
    "I lost at dice again, as usual.",
    "The lanterns make this room look cosy tonight.",
    "My horse threw a shoe halfway here, what a day.",
    "Is it always this noisy on market nights?",
    "The wind nearly took my hat off outside.",
    "I am glad to be in from the cold.",
    "The innkeeper seems in a good mood tonight.",
)
GREETINGS = ("Good evening, {assistant}!", "Hello there, {assistant}.", "Evening, {assistant}!")
CHANGE_OPENERS = ("Correction:", "Things have changed:", "Forget what I said before,")


@dataclass(frozen=True)
class Line:
    """One line a player says (or whispers) to the assistant.

    Attributes:
        speaker: The player's name.
        text: What they say.
        whisper: Whispered to the assistant alone.
        role: ``greeting``, ``fact``, ``change``, ``distractor``, ``small_talk`` or
            ``question``.
        fact: The id of the fact the line plants or changes, if any.
    """

    speaker: str
    text: str
    whisper: bool = False
    role: str = "small_talk"
    fact: str = ""


@dataclass
class Fact:
    """A planted fact.

    Attributes:
        id: A short name, unique in the conversation.
        kind: One of ``KINDS`` (``fixed`` for the fixed conversation's).
        speaker: Who said it.
        value: The current value: the words that show the fact is still known.
        phrasing: One of ``PHRASINGS`` (of the line that planted it).
        whisper: Whispered: private to its speaker.
        old_values: Values it had before a change (superseded).
        distractor_values: Values of similar facts said beside it.
    """

    id: str
    kind: str
    speaker: str
    value: str
    phrasing: str = "plain"
    whisper: bool = False
    old_values: tuple = ()
    distractor_values: tuple = ()


@dataclass(frozen=True)
class Question:
    """A question asked once the facts are planted.

    Attributes:
        asker: The player asking.
        text: The question.
        fact: The id of the fact it asks about.
        right: Words one of which a right answer holds (empty: a right answer tells nothing
            of the fact, as when a private fact is asked for by someone else).
        wrong: Words no right answer holds (superseded, distractor or private values).
        purpose: ``recall``, ``changed``, ``whisper_back`` or ``private``.
        whisper: Asked in a whisper.
    """

    asker: str
    text: str
    fact: str
    right: tuple
    wrong: tuple = ()
    purpose: str = "recall"
    whisper: bool = False


@dataclass
class Conversation:
    """A whole conversation: who is there, what they say, and what is asked at the end.

    Attributes:
        name: ``generated`` or ``fixed``.
        seed: The seed it was generated from (None for the fixed one).
        assistant: The assistant's name.
        room: The inn's name.
        players: The players' names.
        opening: The lines said before the questions, in order.
        questions: The questions, asked in order after the opening and filler.
        filler: Small talk the harness says between them until the history was compacted.
        facts: The planted facts by id.
    """

    name: str
    seed: object
    assistant: str
    room: str
    players: tuple
    opening: list = field(default_factory=list)
    questions: list = field(default_factory=list)
    filler: list = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    def said_texts(self):
        """Return every line players say in it (opening, filler and questions)."""
        return [line.text for line in self.opening + self.filler] + [
            question.text for question in self.questions
        ]


class _Pools:
    """Draws values without replacement, so that no value is said for two facts."""

    def __init__(self, rng):
        self.rng = rng
        self.taken = {}

    def draw(self, name, pool):
        """Return an item of ``pool`` not drawn before under ``name`` (small talk may repeat)."""
        taken = self.taken.setdefault(name, set())
        left = [item for item in pool if item not in taken]
        if not left and name != "talk":
            raise ValueError(f"too many facts for the {name} pool ({len(pool)} values)")
        value = self.rng.choice(left or list(pool))
        taken.add(value)
        return value

    def number(self):
        return self.draw("number", range(3, 98))


def _capitalized(text):
    return text[0].upper() + text[1:]


def _lowered(text):
    """Lower the first letter, unless the sentence starts with a name or "I"."""
    first = text.split(" ", 1)[0]
    keep = first == "I" or first[0].isupper() and first.lower() not in ("the", "my")
    return text if keep else text[0].lower() + text[1:]


def _phrased(statement, phrasing, pools):
    """Return ``statement`` (a sentence with its full stop) said in ``phrasing``."""
    if phrasing == "remember":
        return f"Remember this: {_lowered(statement)}"
    if phrasing == "small_talk":
        before, after = pools.draw("talk", SMALL_TALK), pools.draw("talk", SMALL_TALK)
        return f"{before} {statement} {after}"
    if phrasing == "aside":
        return f"{pools.draw('talk', SMALL_TALK)} Oh, and by the way, {_lowered(statement)}"
    return statement


# Each kind: a function (pools, speaker, others) -> (subject, value statement, question maker,
# value drawer). The subject fixes what the question asks about; a value fills the statement.


def _number(pools, speaker, others):
    merchant, item = pools.draw("merchant", MERCHANTS)
    town, coin = pools.draw("town", TOWNS), pools.rng.choice(COINS)

    def say(value, town=town):
        return f"{_capitalized(merchant)} in {town} charges {value} {coin} for a {item}."

    question = f"How much does {merchant} in {town} charge for a {item}?"
    return say, question, lambda: str(pools.number()), lambda v: say(v, pools.draw("town", TOWNS))


def _name(pools, speaker, others):
    pet = pools.draw("pet", PETS)
    other = pools.rng.choice(others)

    def say(value):
        return f"My {pet} is called {value}."

    return (
        say,
        (other, f"What is {speaker}'s {pet} called?"),
        lambda: pools.draw("pet_name", PET_NAMES),
        # the distractor: another player's pet of the same kind
        lambda v: (other, say(v)),
    )


def _place(pools, speaker, others):
    thing = pools.draw("thing", HIDDEN_THINGS)
    landmarks = {word: phrase for phrase, word in LANDMARKS}
    town = pools.draw("town", TOWNS)

    def say(word, thing=thing):
        return f"I hid {thing} under {landmarks[word]} in {town}."

    def distractor(word):
        return say(word, pools.draw("thing", HIDDEN_THINGS))

    question = f"Where did {speaker} hide {thing}?"
    return say, question, lambda: pools.draw("landmark", list(landmarks)), distractor


def _promise(pools, speaker, others):
    promised, elsewhere = pools.rng.sample(others, 2) if len(others) > 1 else (others * 2)[:2]
    day = pools.rng.choice(DAYS)

    def say(goods, whom=promised):
        return f"I promised {whom} to bring {goods} on {day}."

    return (
        say,
        (promised, f"What did {speaker} promise to bring me?"),
        lambda: pools.draw("goods", GOODS),
        lambda v: say(v, elsewhere),
    )


def _password(pools, speaker, others):
    door = pools.draw("door", DOORS)

    def say(word, door=door):
        return f"The password for {door} is {word}."

    question = f"What is the password for {door}?"
    distractor = lambda word: say(word, pools.draw("door", DOORS))  # noqa: E731
    return say, question, lambda: pools.draw("password", PASSWORDS), distractor


def _relation(pools, speaker, others):
    relation = pools.draw("relation", RELATIONS)
    job, town = pools.rng.choice(OCCUPATIONS), pools.draw("town", TOWNS)
    other = pools.rng.choice(others)

    def say(name):
        return f"My {relation} {name} works as {job} in {town}."

    return (
        say,
        (other, f"What is the name of {speaker}'s {relation}?"),
        lambda: pools.draw("relative", RELATIVE_NAMES),
        lambda v: (other, say(v)),
    )


MAKERS = {
    "number": _number,
    "name": _name,
    "place": _place,
    "promise": _promise,
    "password": _password,
    "relation": _relation,
}


@dataclass
class Shape:
    """How big a generated conversation is (defaults: a few minutes on a 2-core CPU)."""

    facts: int = 7
    questions: int = 6
    changes: int = 1
    whispers: int = 1
    distractors: int = 2
    small_talk: int = 3
    filler: int = 24

    def check(self):
        """Raise ValueError naming a field that is not a whole number in its range."""
        for name, low in (("facts", 1), ("questions", 1), ("filler", 0), ("small_talk", 0)):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < low:
                raise ValueError(f"{name} must be a whole number >= {low}")
        for name in ("changes", "whispers", "distractors"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= self.facts:
                raise ValueError(f"{name} must be a whole number from 0 to facts ({self.facts})")


def generate(seed, shape=None):
    """Generate a conversation from ``seed``: the same seed gives the same conversation.

    Args:
        seed (int): The seed.
        shape (Shape, optional): How many facts, questions, changes... (defaults: ``Shape()``).

    Returns:
        Conversation: Its ``opening`` plants the facts; its ``questions`` ask about them.
    """
    shape = shape or Shape()
    shape.check()
    rng = random.Random(seed)
    pools = _Pools(rng)
    players = tuple(rng.sample(PLAYER_NAMES, 3))
    assistant = rng.choice(ASSISTANT_NAMES)
    conversation = Conversation("generated", seed, assistant, f"{rng.choice(INNS)} Inn", players)
    kinds = [KINDS[i % len(KINDS)] for i in range(shape.facts)]
    rng.shuffle(kinds)
    plans = []
    for number, kind in enumerate(kinds, start=1):
        speaker = rng.choice(players)
        others = [p for p in players if p != speaker]
        say, question, draw, distract = MAKERS[kind](pools, speaker, others)
        asker, text = question if isinstance(question, tuple) else (rng.choice(others), question)
        fact = Fact(f"{kind}-{number}", kind, speaker, draw(), rng.choice(PHRASINGS))
        conversation.facts[fact.id] = fact
        plans.append((fact, say, asker, text, draw, distract))
    _plant(conversation, plans, shape, pools)
    _ask(conversation, plans, shape, rng)
    unsaid = [talk for talk in SMALL_TALK if talk not in pools.taken["talk"]] or list(SMALL_TALK)
    rng.shuffle(unsaid)
    conversation.filler = [
        Line(players[i % 3], unsaid[i % len(unsaid)]) for i in range(shape.filler)
    ]
    return conversation


def _plant(conversation, plans, shape, pools):
    """Write the opening: greeting, facts (some whispered), distractors, small talk, changes."""
    rng = pools.rng
    players = conversation.players
    whispered = {fact.id for fact, *_ in rng.sample(plans, shape.whispers)}
    public = [plan for plan in plans if plan[0].id not in whispered]
    distracted = {p[0].id for p in rng.sample(public, min(shape.distractors, len(public)))}
    changeable = [plan for plan in public if plan[0].kind in CHANGEABLE]
    changed = {p[0].id for p in rng.sample(changeable, min(shape.changes, len(changeable)))}
    lines = [Line(players[0], rng.choice(GREETINGS).format(assistant=conversation.assistant),
                  role="greeting")]  # fmt: skip
    for fact, say, _asker, _text, draw, distract in plans:
        fact.whisper = fact.id in whispered
        line = _phrased(say(fact.value), fact.phrasing, pools)
        lines.append(Line(fact.speaker, line, fact.whisper, "fact", fact.id))
        if fact.id in distracted:
            value = draw()
            speaker, text = _spoken_by(distract(value), rng.choice(players))
            fact.distractor_values += (value,)
            lines.append(Line(speaker, text, role="distractor", fact=fact.id))
    for talk in (pools.draw("talk", SMALL_TALK) for _ in range(shape.small_talk)):
        lines.insert(rng.randrange(1, len(lines) + 1), Line(rng.choice(players), talk))
    for fact, say, _asker, _text, draw, _ in plans:
        if fact.id in changed:
            fact.old_values += (fact.value,)
            fact.value = draw()
            text = f"{rng.choice(CHANGE_OPENERS)} {_lowered(say(fact.value))}"
            lines.append(Line(fact.speaker, text, role="change", fact=fact.id))
    conversation.opening = lines


def _spoken_by(said, default_speaker):
    return said if isinstance(said, tuple) else (default_speaker, said)


def _ask(conversation, plans, shape, rng):
    """Write the questions: changed facts and whispers first, then the others, shuffled."""
    questions = []
    for fact, _say, asker, text, _draw, _ in plans:
        wrong = fact.old_values + fact.distractor_values
        purpose = "changed" if fact.old_values else "recall"
        if fact.whisper:
            outsider = rng.choice([p for p in conversation.players if p != fact.speaker])
            # The whisperer asks in a whisper; someone else asks aloud and must not learn it.
            questions.append(
                Question(fact.speaker, _asked_by_owner(text, fact.speaker, asker), fact.id,
                         (fact.value,), wrong, "whisper_back", whisper=True)
            )  # fmt: skip
            questions.append(Question(outsider, text, fact.id, (), (fact.value,), "private"))
        else:
            questions.append(Question(asker, text, fact.id, (fact.value,), wrong, purpose))
    first = [q for q in questions if q.purpose != "recall"]
    rest = [q for q in questions if q.purpose == "recall"]
    rest.sort(key=lambda q: not conversation.facts[q.fact].distractor_values)
    chosen = (first + rest)[: shape.questions]
    rng.shuffle(chosen)
    conversation.questions = chosen


def _asked_by_owner(text, owner, asker):
    """Turn ``asker``'s question about ``owner`` into the owner's ("did Ada hide" -> "did I")."""
    for before, after in ((f"did {owner} ", "did I "), (f"{owner}'s ", "my "), (f"{owner} ", "I ")):
        if before in text:
            return text.replace(before, after, 1).replace(" me?", f" {asker}?")
    return text


# --- The fixed conversation --------------------------------------------------------------

FIXED_FACTS = (
    # (fact id and value, speaker, line, asker, question, right words)
    ("north gate", "Bob", "I run the forge by the north gate.", "Carol",
     "Where is Bob's forge?", ("north gate",)),
    ("old oak", "Carol", "I buried 40 gold coins under the old oak in Mirkwood.", "Alice",
     "Where did Carol bury her gold coins?", ("oak",)),
    ("12 iron ingots", "Alice", "I promised Bob to deliver 12 iron ingots on Friday.", "Bob",
     "How many iron ingots will Alice deliver to me?", ("12", "twelve")),
    ("swordfish", "Bob", "The password for the cellar door is swordfish.", "Carol",
     "What is the password for the cellar door?", ("swordfish",)),
    ("Thunder", "Carol", "My horse is called Thunder.", "Alice",
     "What is the name of Carol's horse?", ("thunder",)),
    ("Edwin", "Alice", "My brother Edwin keeps bees in the village of Riverrun.", "Carol",
     "Who keeps bees in Riverrun?", ("edwin",)),
    ("six bells", "Bob", "The ferry to Port Ashby leaves at six bells every morning.", "Alice",
     "When does the ferry to Port Ashby leave?", ("six", "6")),
    ("Willow Lane", "Carol", "The healer Mira lives at the end of Willow Lane.", "Bob",
     "Where does the healer Mira live?", ("willow",)),
    ("25 silver", "Alice", "I owe the innkeeper 25 silver pieces.", "Carol",
     "How much silver does Alice owe the innkeeper?", ("25", "twenty-five", "twenty five")),
    ("bell tower", "Bob", "The map to the dragon lair is hidden in the chapel bell tower.",
     "Alice", "Where is the map to the dragon lair hidden?", ("bell tower", "chapel")),
)  # fmt: skip
FIXED_SMALL_TALK = (
    ("Carol", "What do you think of the ale they serve here?"),
    ("Bob", "It has been a long, cold week at work, friend."),
    ("Alice", "Do you like the songs the bard plays in the evening?"),
    ("Bob", "Tell me something cheerful, Wren."),
    ("Carol", "The fire is warm tonight, is it not?"),
    ("Alice", "Have you ever travelled far from this inn?"),
)
FIXED_QUESTION_ORDER = (1, 4, 0, 7, 2, 9, 5, 3, 8, 6)
FIXED_FILLER = 30


def fixed():
    """Return the fixed conversation ``make eval-local`` played before it generated them."""
    conversation = Conversation("fixed", None, "Wren", "Crossroads Inn", ("Alice", "Bob", "Carol"))
    conversation.opening = [Line("Alice", "Hello Wren, good evening!", role="greeting")]
    for value, speaker, line, *_ in FIXED_FACTS:
        conversation.facts[value] = Fact(value, "fixed", speaker, value)
        conversation.opening.append(Line(speaker, line, role="fact", fact=value))
    conversation.filler = [
        Line(*FIXED_SMALL_TALK[i % len(FIXED_SMALL_TALK)]) for i in range(FIXED_FILLER)
    ]
    for index in FIXED_QUESTION_ORDER:
        value, _, _, asker, question, right = FIXED_FACTS[index]
        conversation.questions.append(Question(asker, question, value, right))
    return conversation
