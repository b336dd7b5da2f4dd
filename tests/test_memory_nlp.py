"""Rule annotations on invented sentences: what the entity view and entity swap rest on."""

from __future__ import annotations

from evolvemem.memory.nlp import annotate, strip_persons, tokenize, topics_of

SPEAKERS = ("Priya", "Tomasz")


def test_known_persons_are_found_anywhere_and_lowercased():
    found = annotate("Priya went hiking. tomasz stayed home with PRIYA's cat.", SPEAKERS)
    assert set(found.persons) >= {"priya", "tomasz"}
    assert all(p == p.lower() for p in found.persons)


def test_capitalised_names_mid_sentence_count_but_sentence_initial_words_do_not():
    found = annotate("Yesterday I met Lena Okafor at the bakery. Thanks for asking!", SPEAKERS)
    assert "lena okafor" in found.persons
    assert "yesterday" not in found.persons and "thanks" not in found.persons
    # a sentence-initial name is recognised when it is possessive or also appears mid-sentence
    assert "anika" in annotate("Anika's bike was stolen.").persons
    assert "anika" in annotate("Anika called. I told Anika the news.").persons


def test_months_weekdays_and_languages_are_not_people():
    found = annotate("We meet every Monday in May and speak Portuguese with Dr Silva.", SPEAKERS)
    assert not {"monday", "may", "portuguese"} & set(found.persons)
    assert "portuguese" in found.entities
    assert "silva" in found.persons


def test_locations_from_gazetteer_prepositions_and_place_heads():
    found = annotate("Tomasz flew from Lisbon to New York, then moved to Woodhaven near Maple Lake Park.", SPEAKERS)
    assert {"lisbon", "new york", "woodhaven", "maple lake park"} <= set(found.locations)
    assert "woodhaven" not in found.persons
    # "to" before a name is a place only after a verb of motion
    assert "lena" in annotate("I said to Lena that it was late.").persons
    assert not annotate("I said to Lena that it was late.").locations
    # the query side is often lowercase: the gazetteer still matches
    assert "lisbon" in annotate("did priya ever go to lisbon?", SPEAKERS).locations
    # "us" is a pronoun unless written as a country code
    assert "us" not in annotate("Come visit us soon!").locations


def test_entities_titles_numbers_dates_and_named_events():
    found = annotate(
        'I finished "The Silent Orchard" on March 3, 2022 after running 5 km at the Riverside Jazz Festival.'
    )
    assert "the silent orchard" in found.entities
    assert "silent orchard" not in found.persons  # a quoted title is not a run of names
    assert {"5 km", "2022", "march 3 2022", "riverside jazz festival"} <= set(found.entities)
    assert "riverside jazz festival" not in found.persons
    assert "lgbtq" in annotate("She joined an LGBTQ choir.").entities  # acronyms are entities


def test_keywords_skip_stopwords_and_names_and_rank_by_frequency():
    found = annotate("Priya loves pottery. Pottery classes with Tomasz, more pottery on weekends!", SPEAKERS)
    assert found.keywords[0] == "pottery"
    assert not {"priya", "tomasz", "with", "more"} & set(found.keywords)
    assert annotate("Priya loves pottery.", SPEAKERS).keywords == annotate("Priya loves pottery.", SPEAKERS).keywords


def test_topics_match_plurals_and_several_tables():
    assert set(topics_of(tokenize("We adopted two puppies and my sister helps"))) >= {"pets", "family"}
    assert "music" in annotate("Tomasz plays guitar in two bands").topics
    assert annotate("The weather is fine").topics == ()


def test_tokenize_lowercases_and_drops_possessives_and_stopwords():
    assert tokenize("Priya's dog’s toys ARE in the garden, I'm sure!") == ["priya", "dog", "toys", "garden"]
    assert tokenize("We ran 5 km") == ["ran", "5", "km"]


def test_strip_persons_removes_names_possessives_and_name_parts():
    assert (
        strip_persons("What did Priya's sister give Tomasz Nowak?", ["priya", "tomasz nowak"])
        == "What did sister give ?"
    )
    assert strip_persons("Where does Nowak live?", ["Tomasz Nowak"]) == "Where does live?"
    assert strip_persons("Priya’s garden and Priyanka", ["Priya"]) == "garden and Priyanka"
    assert strip_persons("nothing to strip", []) == "nothing to strip"


def test_query_and_memory_annotations_meet_on_equal_values():
    memory = annotate("[8 May 2023] Priya: I moved to Lisbon with Lena Okafor last year.", SPEAKERS)
    query = annotate("When did Priya move to lisbon?", SPEAKERS)
    assert set(query.persons) & set(memory.persons) == {"priya"}
    assert set(query.locations) & set(memory.locations) == {"lisbon"}
